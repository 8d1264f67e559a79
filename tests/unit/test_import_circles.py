"""No run-time import circle among Kadence's modules (issue 49 item 3): module A imports B (at
the top or inside a function) and B, directly or through others, imports A. A circle hides
which module builds on which, and a function-level import that closes one (``close_run``
importing the updates that import the effects it lived in) breaks as soon as it moves to the
top. Imports under ``if TYPE_CHECKING:`` do not run and are not counted; a package's
``__init__`` re-exporting its submodules, and a submodule importing its own package, are not
circles of code either and are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.tree import FOLDERS, _resolve_relative, module_name, source_files


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    for sub in ast.walk(child):
                        if hasattr(sub, "lineno"):
                            lines.add(sub.lineno)
    return lines


def graph() -> dict[str, set[str]]:
    modules: dict[str, tuple[Path, bool]] = {}
    folder_of: dict[str, str] = {}
    for folder in FOLDERS:
        for path in source_files(folder):
            modules[module_name(folder, path)] = (path, path.name == "__init__.py")
            folder_of[module_name(folder, path)] = folder
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for mod, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = _resolve_relative(mod, is_package, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if not target or target == mod:
                    continue
                # a package and its own submodules (same folder): re-exports, not circles of code
                same = folder_of[target] == folder_of[mod]
                if same and modules[target][1] and mod.startswith(target + "."):
                    continue
                if same and is_package and target.startswith(mod + "."):
                    continue
                edges[mod].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others():
    found = circles(graph())
    assert found == [], "import circles (split the shared part into a module both import):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_the_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_imports():
    edges = graph()
    # current_codec imports the payload codecs inside the function, not at the top of the module
    assert "kadence.topics.payload" in edges["kadence.cli.codec"]
