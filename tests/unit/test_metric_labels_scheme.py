"""One label scheme (issue 21): every family an engine process defines carries ``namespace`` as
its first label, and a task queue is always ``task_queue``. The gateway is the exception: one
gateway serves every namespace its keys name, and labels by route; so is
``kadence_codec_old_version_decodes_total`` and ``kadence_codec_fallbacks_total``
(``topics/codec_metrics.py``), counts of the process's codecs, which every namespace it serves
shares (record, version, direction and outcome labels)."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from kadence._worker_metrics import WorkerMetrics
from kadence.connectors.archiver import _Metrics as ArchiverMetrics
from kadence.connectors.projection_app import ProjectionMetrics
from kadence.processors.builds import BacklogReporter, BuildDefaults
from kadence.processors.processor_metrics import ProcessorMetrics
from kadence.processors.timer_metrics import TimerMetrics
from kadence.topics.consumer_lag import lag_gauge


def _label_names(registry: CollectorRegistry) -> dict[str, tuple[str, ...]]:
    # prometheus-client keeps a family's label names on the collector (``_labelnames``); the
    # registry's collectors are what ``register`` was given
    return {
        collector._name: tuple(collector._labelnames)  # noqa: SLF001
        for collector in list(registry._collector_to_names)
    }  # noqa: SLF001


def test_every_engine_family_is_labelled_by_namespace_first():
    conf = lambda *a, **k: {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}  # noqa: E731
    kafka = SimpleNamespace(namespace="ns", builds="ns.builds", consumer=conf, waiting_consumer=conf, security={})
    families: dict[str, tuple[str, ...]] = {}
    # a registry each: several components define the consumer lag family
    for make in (
        lambda r: ProcessorMetrics(r, "ns"),
        lambda r: TimerMetrics(r, "ns"),
        WorkerMetrics,
        lambda r: ProjectionMetrics(r, "ns"),
        lambda r: ArchiverMetrics(r, "ns"),
        lag_gauge,
        lambda r: BacklogReporter(kafka, r, 1.0),
        lambda r: BuildDefaults(kafka, r).close(),
    ):
        r = CollectorRegistry()
        make(r)
        families.update(_label_names(r))
    assert len(families) >= 40, sorted(families)
    wrong = {name: labels for name, labels in families.items() if not labels or labels[0] != "namespace"}
    assert wrong == {}
    assert not [name for name, labels in families.items() if "queue" in labels]
