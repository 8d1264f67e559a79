"""History events are typed end to end at the point they are written (issue 49): the processors'
``emit(t, st, "TimerStarted", {...})`` checks the attributes against the event type's record
(``schemas.records.EmitHistoryEvent``, generated from the schemas), so a misspelt or missing
attribute is a type checker's finding, not the codec's error at commit time. Here mypy runs on
two snippets, one right and one with a misspelt attribute, over the package as ``make lint``
checks it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SNIPPET = """
from kadence.processors.effects import Transition, emit
from kadence.schemas.records import WorkflowState


def fire(t: Transition, st: WorkflowState) -> None:
    emit(t, st, "TimerFired", {{"timer_id": "t1", "{attribute}": 3}})
"""


def _typecheck_tree() -> Path:
    spec = importlib.util.spec_from_file_location("kadence_typecheck", ROOT / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tree: Path = module.TREE
    if not (tree / "kadence").exists():  # `make lint` builds it; a unit run alone may not have
        module.build_tree()
    return tree


def test_a_misspelt_event_attribute_is_a_type_finding(tmp_path):
    tree = _typecheck_tree()
    # module names of this run only (mypy's cache is keyed by module name)
    tag = uuid.uuid4().hex[:8]
    right, wrong = tmp_path / f"right_{tag}.py", tmp_path / f"wrong_{tag}.py"
    right.write_text(_SNIPPET.format(attribute="started_seq"))
    wrong.write_text(_SNIPPET.format(attribute="startd_seq"))
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(right), str(wrong)],
        cwd=tree,
        env={"MYPY_CACHE_DIR": str(tree / ".mypy_cache"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    findings = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert [f for f in findings if f"{right.name}:" in f] == [], run.stdout
    assert any(f"{wrong.name}:" in f and "call-overload" in f for f in findings), run.stdout
