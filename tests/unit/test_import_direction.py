"""Import direction (the README's layout table; decision 0001): ``schemas`` <- ``topics`` <- {processors, sdk, gateway,
connectors}; those four never import each other. ``readmodels`` (the Redis projections' readers) sits beside
``topics`` as an adapter: it imports the kernel, and the gateway, the connectors and the operations import it; so
does ``storage`` (the archive and payload stores), which the SDK, the gateway, the connectors and the test kit import.

The repository folders map to the namespace ``kadence.*``; the SDK is the top-level package
``kadence`` itself, so ``from kadence import Client`` or ``import kadence.workflow`` inside
processors/ is an import of the SDK, while ``kadence.topics...`` is fine. ``cli/`` sits above
everything and is not restricted; ``samples/`` and ``operations/`` may import only the SDK and ``kadence.topics``;
``testing/`` (``kadence.testing``, the users' test kit) may import the processors and the SDK,
and nothing imports it; ``devstack/`` (``kadence.devstack``, the brokers, Redis and registry the
project's own runs start) imports nothing of Kadence, and the test kit's plugin uses it.

Every ``import``/``from ... import`` statement counts, wherever it is (inside functions, under
``if TYPE_CHECKING:``), and so do ``importlib.import_module("...")``/``__import__("...")`` calls
with a literal module name.
"""

from __future__ import annotations

import ast

import pytest

from tests.support.tree import FOLDERS, ROOT, _resolve_relative, module_name, source_files

#: component -> components it may import (itself included); None: unrestricted
ALLOWED = {
    "schemas": {"schemas"},
    "topics": {"schemas", "topics"},
    # the Redis read models: an adapter beside the kernel (errors, serde), read by the services
    "readmodels": {"schemas", "topics", "readmodels"},
    # the archive and payload stores (a directory, S3): an adapter beside the kernel, behind its ArchiveStore
    "storage": {"schemas", "topics", "storage"},
    "processors": {"schemas", "topics", "processors"},
    "sdk": {"schemas", "topics", "storage", "sdk"},
    "gateway": {"schemas", "topics", "readmodels", "storage", "gateway"},
    "connectors": {"schemas", "topics", "readmodels", "storage", "connectors"},
    # the samples compose what users compose: the SDK, and the gateway with a worker in its process
    "samples": {"sdk", "topics", "gateway", "samples"},
    "cli": None,
    # the test kit runs the engine's state machine under the SDK's replay loop, in one process
    "testing": {"schemas", "topics", "storage", "processors", "sdk", "testing", "devstack"},
    # the dev stack's launchers: loaded from their files by scripts/devstack.py before any
    # virtualenv exists, so the standard library and each other only
    "devstack": {"devstack"},
    # operator workflows (batch operations) built on the SDK, like the samples
    "operations": {"sdk", "topics", "readmodels", "operations"},
}

#: the sub-packages of ``kadence`` that are not the SDK
SUBPACKAGES = {pkg: comp for comp, pkg in FOLDERS.values() if pkg != "kadence"}


def component_of(module: str) -> str | None:
    """The component a fully qualified module belongs to; None when it is not Kadence's."""
    if module != "kadence" and not module.startswith("kadence."):
        return None
    for pkg, comp in SUBPACKAGES.items():
        if module == pkg or module.startswith(pkg + "."):
            return comp
    return "sdk"  # kadence, kadence.workflow, kadence._client, kadence.Client ...


def imported_modules(tree: ast.AST, current: str, is_package: bool):
    """(line, statement text, fully qualified name) for every import in a module's AST."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, f"import {alias.name}", alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(current, is_package, node.level, node.module)
            dots = "." * node.level
            for alias in node.names:
                text = f"from {dots}{node.module or ''} import {alias.name}"
                # `from kadence import topics` imports kadence.topics; `from kadence import Client`
                # imports from the SDK package: classify base.name, which covers both
                target = base if alias.name == "*" else f"{base}.{alias.name}"
                yield node.lineno, text, target
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__"):
                yield node.lineno, f"{name}({node.args[0].value!r})", node.args[0].value


def violations(folder: str, source: str, filename: str, module: str, is_package: bool = False) -> list[str]:
    """The forbidden imports of one source file of ``folder``, as "file:line: ..." messages."""
    component = FOLDERS[folder][0]
    allowed = ALLOWED[component]
    if allowed is None:
        return []
    tree = ast.parse(source, filename=filename)
    out = []
    for line, text, target in imported_modules(tree, module, is_package):
        other = component_of(target)
        if other is not None and other not in allowed:
            out.append(
                f"{filename}:{line}: `{text}` imports {other} ({target}); "
                f"{folder}/ may import only {', '.join(sorted(allowed))}"
            )
    return out


CHECKED = [
    "schemas",
    "topics",
    "readmodels",
    "storage",
    "processors",
    "sdk",
    "gateway",
    "connectors",
    "samples",
    "operations",
]


@pytest.mark.parametrize("folder", CHECKED)
def test_imports_follow_the_design_direction(folder):
    files = source_files(folder)
    assert files, f"no Python files under {folder}/: is ROOT ({ROOT}) right?"
    found = []
    for path in files:
        found += violations(
            folder, path.read_text(), str(path.relative_to(ROOT)), module_name(folder, path), path.name == "__init__.py"
        )
    assert found == [], "imports against the layout's direction (README):\n  " + "\n  ".join(found)


def test_the_checker_sees_the_imports_that_exist():
    """Guard against a checker that silently finds nothing: known imports are resolved."""
    path = ROOT / "sdk" / "_worker.py"
    targets = {t for _, _, t in imported_modules(ast.parse(path.read_text()), "kadence._worker", False)}
    assert "kadence._client.Client" in targets  # from ._client import Client
    path = ROOT / "sdk" / "_workflow_tasks.py"
    targets = {t for _, _, t in imported_modules(ast.parse(path.read_text()), "kadence._workflow_tasks", False)}
    assert "kadence.topics.serde" in targets  # from kadence.topics import serde
    assert component_of("kadence._client.Client") == "sdk"
    assert module_name("sdk", ROOT / "sdk" / "__init__.py") == "kadence"
    assert module_name("topics", ROOT / "topics" / "serde.py") == "kadence.topics.serde"


# ---------------------------------------------------------------- the checker flags violations

BAD = [
    ("processors", "from kadence import Client\n", "kadence.processors.x", "sdk"),
    ("processors", "import kadence.workflow\n", "kadence.processors.x", "sdk"),
    ("processors", "import kadence\n", "kadence.processors.x", "sdk"),
    ("processors", "from kadence import workflow as wf\n", "kadence.processors.x", "sdk"),
    ("processors", "def f():\n    from kadence.gateway import create_app\n", "kadence.processors.x", "gateway"),
    ("sdk", "from kadence.processors import transition\n", "kadence._worker", "processors"),
    (
        "sdk",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kadence.processors.store\n",
        "kadence._worker",
        "processors",
    ),
    ("sdk", "import importlib\nimportlib.import_module('kadence.processors')\n", "kadence._worker", "processors"),
    ("gateway", "from kadence.connectors import redis_sink\n", "kadence.gateway.app", "connectors"),
    ("connectors", "from kadence import Worker\n", "kadence.connectors.visibility", "sdk"),
    ("topics", "from kadence.processors.state_machine import transition\n", "kadence.topics.x", "processors"),
    ("topics", "from kadence import workflow\n", "kadence.topics.x", "sdk"),
    ("topics", "from .. import Client\n", "kadence.topics.x", "sdk"),  # relative: kadence.Client
    ("schemas", "from kadence.topics import serde\n", "kadence.schemas", "topics"),
    # the kernel never reaches for an adapter, nor an adapter for an engine component
    ("topics", "from kadence.readmodels import VisibilityReader\n", "kadence.topics.x", "readmodels"),
    ("readmodels", "from kadence.processors.store import MemoryShardStore\n", "kadence.readmodels.x", "processors"),
    ("topics", "from kadence.storage import open_store\n", "kadence.topics.archive", "storage"),
    ("storage", "from kadence.readmodels import VisibilityReader\n", "kadence.storage.x", "readmodels"),
    ("processors", "from kadence.readmodels.keys import ProjectionKeys\n", "kadence.processors.x", "readmodels"),
    ("samples", "from kadence.processors import HistoryProcessor\n", "kadence.samples.demo", "processors"),
]


@pytest.mark.parametrize("folder, source, module, forbidden", BAD)
def test_checker_flags_a_violation(folder, source, module, forbidden):
    found = violations(folder, source, f"{folder}/synthetic.py", module)
    assert len(found) == 1, found
    assert found[0].startswith(f"{folder}/synthetic.py:") and f"imports {forbidden}" in found[0]
    line = int(found[0].split(":")[1])
    assert "import" in source.splitlines()[line - 1]  # the line of the offending statement


GOOD = [
    (
        "processors",
        "from kadence.topics import serde\nimport kadence.topics.records\nfrom . import store\n",
        "kadence.processors.history_processor",
        False,
    ),
    ("processors", "from kadence import topics, schemas\n", "kadence.processors.x", False),
    ("sdk", "from . import activity, workflow\nfrom ._client import Client\nimport kadence\n", "kadence", True),
    ("sdk", "from .. import workflow\n", "kadence.sub.mod", False),
    (
        "gateway",
        "from kadence.topics.engine_client import EngineClient\nimport fastapi\n",
        "kadence.gateway.app",
        False,
    ),
    (
        "topics",
        "from kadence.schemas import load_schema_set\nfrom .errors import SchemaError\n",
        "kadence.topics.serde",
        False,
    ),
    ("schemas", "import json\nfrom importlib import resources\n", "kadence.schemas", True),
    (
        "samples",
        "from kadence import activity, workflow\nfrom kadence.topics import KafkaConfig\n",
        "kadence.samples.x",
        False,
    ),
    (
        "cli",
        "from kadence.processors import HistoryProcessor\nfrom kadence.gateway import create_app\n",
        "kadence.cli.main",
        False,
    ),
]


@pytest.mark.parametrize("folder, source, module, is_package", GOOD)
def test_checker_accepts_allowed_imports(folder, source, module, is_package):
    assert violations(folder, source, f"{folder}/synthetic.py", module, is_package) == []


def test_relative_import_is_resolved_against_the_package():
    # inside kadence.topics (a package __init__), `from .errors import X` is kadence.topics.errors.X
    [(_, _, target)] = list(imported_modules(ast.parse("from .errors import X\n"), "kadence.topics", True))
    assert target == "kadence.topics.errors.X"
    # inside the module kadence.topics.serde it resolves the same way
    [(_, _, target)] = list(imported_modules(ast.parse("from .errors import X\n"), "kadence.topics.serde", False))
    assert target == "kadence.topics.errors.X"
    # two dots from kadence.processors.store reach the SDK package `kadence`
    [(_, _, target)] = list(imported_modules(ast.parse("from .. import Worker\n"), "kadence.processors.store", False))
    assert component_of(target) == "sdk"


def forbidden_imports_in_tests(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of one module under ``tests/`` that the tests' layout forbids: another test
    module (``test_*``: what two tests share goes to ``tests/support`` or a ``*_support.py``) or
    ``bench`` (the benchmarks are not a library of the tests)."""
    bad = []
    for line, text, target in imported_modules(ast.parse(source), module, is_package):
        parts = target.split(".")
        if parts[0] == "bench" or (parts[0] == "tests" and any(part.startswith("test_") for part in parts)):
            bad.append(f"{module}:{line}: `{text}`")
    return bad


def test_no_test_module_imports_another_or_the_benchmarks():
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        is_package = rel.name == "__init__"
        module = ".".join(rel.parts[:-1] if is_package else rel.parts)
        found += forbidden_imports_in_tests(path.read_text(), module, is_package)
    assert found == [], "tests importing test modules or bench:\n  " + "\n  ".join(found)


@pytest.mark.parametrize(
    "source, bad",
    [
        ("from tests.unit.test_updates import Cart\n", True),
        ("from .test_cli import kadence\n", True),
        ("import tests.integration.test_cli\n", True),
        ("from bench.codecs import fastavro_encode\n", True),
        ("from tests.support.cart import Cart\n", False),
        ("from .conftest import wait_until\n", False),
        ("from tests.unit.docs_examples import run_example\n", False),
    ],
)
def test_the_tests_import_check_tells_a_test_module_from_a_support_module(source, bad):
    assert bool(forbidden_imports_in_tests(source, "tests.integration.test_x")) == bad
