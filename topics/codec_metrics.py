"""``kadence_codec_old_version_decodes_total{record, version}``: records of an older schema
version this process decoded (issue 20). The current version is read by generated code; an older
one goes through fastavro's schema resolution, several times slower. During a rolling upgrade the
count grows while old records are read and then stops; one that keeps growing names a writer
still on an old version. Read from the codecs at scrape time (``serde.old_version_decodes``).

``kadence_codec_fallbacks_total{record, direction, outcome}``: values (``write``) and records
(``read``) the generated codec could not handle, handed to the closure codec: ``refused`` when
that one raised too (a bad value or a damaged record: the caller got a ``SchemaError``),
``recovered`` when it did not (a gap in the generated code: it should stay 0, and is logged).

``kadence_codec_write_version``: the schema version the process writes (``serde.write_version``:
the current one, or ``KADENCE_SCHEMA_WRITE_VERSION`` during a rolling upgrade), so an operator
sees which instances are still pinned."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from . import serde

__all__ = ["register_codec_metrics"]


class _OldVersionDecodes:
    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "kadence_codec_old_version_decodes",
            "records of an older schema version decoded (through fastavro)",
            labels=["record", "version"],
        )
        for (record, version), n in sorted(serde.old_version_decodes().items()):
            family.add_metric([record, str(version)], n)
        yield family
        fallbacks = CounterMetricFamily(
            "kadence_codec_fallbacks",
            "values and records the generated codec could not handle, taken over by the closure codec",
            labels=["record", "direction", "outcome"],
        )
        for (record, direction, outcome), n in sorted(serde.fallbacks().items()):
            fallbacks.add_metric([record, direction, outcome], n)
        yield fallbacks
        yield GaugeMetricFamily(
            "kadence_codec_write_version", "the schema version this process writes records in", serde.write_version()
        )

    def describe(self) -> list[Metric]:
        return []


def register_codec_metrics(registry: CollectorRegistry) -> None:
    """Add the family to ``registry``, once (processes that run several components share one)."""
    if getattr(registry, "_kadence_codec_metrics", False):
        return
    registry.register(_OldVersionDecodes())
    registry._kadence_codec_metrics = True  # type: ignore[attr-defined]
