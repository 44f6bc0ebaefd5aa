"""The suite's own set-up under pytest-xdist (`-n auto`, the README's command): each worker uses
its share of the cores and a cache of its own."""
import os
import subprocess
import sys

import pytest

WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
needs_workers = pytest.mark.skipif(WORKERS < 2, reason="the suite runs in one process")


@needs_workers
def test_torch_and_the_processes_tests_start_use_the_workers_share_of_the_cores():
    import torch

    share = max(1, (os.cpu_count() or 1) // WORKERS)
    assert torch.get_num_threads() == share
    child = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                           capture_output=True, text=True, timeout=120, check=True)
    assert int(child.stdout) == share


@needs_workers
def test_each_worker_has_a_cache_of_its_own():
    cache = os.environ["BOOLCL_CACHE"]
    assert os.path.basename(cache).startswith(f"boolcl-test-cache-{os.environ['PYTEST_XDIST_WORKER']}-")
    assert not cache.startswith(os.path.expanduser("~/.cache"))
