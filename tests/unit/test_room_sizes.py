"""The giants do not grow (issue 49): no product module over 800 lines and no function over 100
lines, except those listed here, each at most the size it had when it was listed. The lists may
only shrink: an entry whose module or function fell under the limit must be removed, and one that
grew fails. Split a room rather than raise a number (generated code is not counted)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = (
    "topics",
    "schemas",
    "processors",
    "gateway",
    "sdk",
    "connectors",
    "cli",
    "readmodels",
    "storage",
    "testing",
    "devstack",
    "operations",
)
GENERATED = {"schemas/records.py"}
MODULE_LIMIT, FUNCTION_LIMIT = 800, 100

#: module -> its size when listed (lines)
BIG_MODULES = {
    "sdk/_instance.py": 819,
}
#: module::qualified function -> its size when listed (lines)
BIG_FUNCTIONS = {
    "processors/store.py::restore_shard": 122,
    "sdk/_worker.py::Worker.__init__": 111,
}


def _modules():
    for root in PRODUCT:
        for path in sorted((ROOT / root).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in GENERATED and "__pycache__" not in rel:
                yield rel, path.read_text()


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")


def _sizes():
    modules, functions = {}, {}
    for rel, text in _modules():
        modules[rel] = len(text.splitlines())
        for name, lines in _functions(ast.parse(text)):
            functions[f"{rel}::{name}"] = max(lines, functions.get(f"{rel}::{name}", 0))
    return modules, functions


def _check(sizes: dict[str, int], listed: dict[str, int], limit: int, what: str) -> list[str]:
    problems = []
    for key, size in sorted(sizes.items()):
        if size > limit and key not in listed:
            problems.append(f"{key}: {size} lines, over the {what} limit of {limit}: split it")
        elif key in listed and size > listed[key]:
            problems.append(f"{key}: {size} lines, grew past the {listed[key]} it was listed at: split it")
    for key in sorted(listed):
        if sizes.get(key, 0) <= limit:
            problems.append(
                f"{key} is no longer over the {what} limit ({sizes.get(key, 0)} lines): remove it from the list"
            )
    return problems


def test_no_module_or_function_grows_past_its_limit():
    modules, functions = _sizes()
    problems = _check(modules, BIG_MODULES, MODULE_LIMIT, "module") + _check(
        functions, BIG_FUNCTIONS, FUNCTION_LIMIT, "function"
    )
    assert problems == [], "\n".join(problems)


def test_the_check_fails_on_growth_on_a_new_giant_and_on_a_stale_entry():
    listed = {"a.py": 900, "gone.py": 850}
    sizes = {"a.py": 901, "b.py": 801, "gone.py": 700}
    problems = _check(sizes, listed, 800, "module")
    assert [p.split(":")[0].split(" ")[0] for p in problems] == ["a.py", "b.py", "gone.py"]
