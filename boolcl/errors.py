"""The exceptions every layer raises, at the very bottom so that raising one imports nothing.

`boolcl` (cli.py) turns each into a one-line message and exit code 2; anything else is a bug.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable


class ConfigError(ValueError):
    """A config that cannot work; raised before any compute."""


class DataError(ValueError):
    """A data file that cannot be used; the message names file, line and field."""

    def __init__(self, path: str | os.PathLike, line: int | None, message: str, field: str | None = None):
        where = f"{path}" + (f":{line}" if line is not None else "")
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.field = str(path), line, field


class ModelError(ValueError):
    """A model that cannot be loaded; the message says what to do instead."""


class TrainingError(RuntimeError):
    """Training stopped for a reason the user must act on; the message says which."""


class LLMError(ConfigError):
    """The endpoint cannot be used (auth, model, endpoint, or it kept failing); the run stops."""


def report_user_errors(prog: str, run: Callable[[], int]) -> int:
    """`run()`'s exit code; a user's mistake (the errors above) or Ctrl-C becomes one plain line on
    stderr, never wrapped, so paths and line numbers survive copy-paste and grep, and exit 2 or 130."""
    try:
        return run()
    except (ConfigError, DataError, ModelError, TrainingError) as e:
        print(f"{prog}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
