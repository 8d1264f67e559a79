"""The shipped Grafana dashboard and Prometheus alert rules (docs/monitoring/) name only metrics
the code defines, with a sample suffix their type has, and docs/metrics.md documents every family
the code defines. A renamed metric fails here instead of leaving a dashboard panel empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "docs" / "monitoring"
CODE_DIRS = ("processors", "sdk", "connectors", "gateway", "topics", "cli")
#: the sample names Prometheus exposes per family type
SUFFIXES = {"Counter": ("_total",), "Gauge": ("",), "Histogram": ("_bucket", "_count", "_sum")}


def _families() -> dict[str, str]:
    """family name -> type, from every ``Counter("kadence_...")``, ``Gauge(...)``, ``Histogram(...)``."""
    found: dict[str, str] = {}
    pattern = re.compile(r"\b(Counter|Gauge|Histogram)\(\s*\"(kadence_[a-z0-9_]+)\"", re.S)
    for d in CODE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            for kind, name in pattern.findall(path.read_text()):
                if kind == "Counter":  # prometheus-client drops a counter's own _total suffix
                    name = name.removesuffix("_total")
                assert found.get(name, kind) == kind, f"{name} defined as two types"
                found[name] = kind
    return found


def _samples(families: dict[str, str]) -> set[str]:
    return {name + suffix for name, kind in families.items() for suffix in SUFFIXES[kind]}


def _referenced(expr: str) -> set[str]:
    return set(re.findall(r"\bkadence_[a-z0-9_]+", expr))


def _alert_rules() -> list[dict]:
    doc = yaml.safe_load((MONITORING / "kadence-alerts.yml").read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    dash = json.loads((MONITORING / "kadence-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dash["panels"] for t in panel["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
    return exprs


def test_the_code_defines_the_families_this_test_knows_of():
    families = _families()
    assert families["kadence_processor_runs_closed"] == "Counter"
    assert families["kadence_worker_activity_schedule_to_start_seconds"] == "Histogram"
    assert families["kadence_build_oldest_task_age_seconds"] == "Gauge"
    assert len(families) >= 40


def test_every_family_is_documented_in_metrics_md():
    doc = (ROOT / "docs" / "metrics.md").read_text()
    missing = [
        name + SUFFIXES[kind][0]
        for name, kind in _families().items()
        if f"`{name}{'_total' if kind == 'Counter' else ''}`" not in doc
    ]
    assert missing == []


def test_alert_rules_are_complete_and_name_only_defined_metrics():
    samples = _samples(_families())
    rules = _alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in {"page", "ticket"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        used = _referenced(rule["expr"])
        assert used, f"{rule['alert']} names no kadence metric"
        assert used <= samples, f"{rule['alert']}: unknown {sorted(used - samples)}"
    # what issue 21 asks the rules to cover
    every = " ".join(r["expr"] for r in rules)
    for signal in (
        "kadence_build_oldest_task_age_seconds",
        'outcome="non_determinism"',
        "dead_letters_total",
        "kadence_projection_lag_seconds",
        "kadence_projection_gaps_total",
    ):
        assert signal in every, signal


def test_dashboard_panels_name_only_defined_metrics():
    samples = _samples(_families())
    exprs = _dashboard_exprs()
    assert len(exprs) >= 10
    for expr in exprs:
        used = _referenced(expr)
        assert used and used <= samples, (expr, sorted(used - samples))
