"""Print the import circles of the `boolcl` found first on sys.path, as JSON (run by test_layers.py).

A separate process, so that checking a modified copy of the package never replaces the
modules the rest of the test session has imported.
"""
from __future__ import annotations

import importlib.util
import json
import sys

import grimp


def cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), function-level imports included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph.modules):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    origin = importlib.util.find_spec("boolcl").origin
    print(json.dumps({"origin": origin, "cycles": cycles(grimp.build_graph("boolcl", cache_dir=None))}))
