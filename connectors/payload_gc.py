"""Garbage collection of large payloads (``kadence payloads gc``).

Mark and sweep. Mark: every payload reference still reachable, found by reading the namespaces'
history and state topics from the start (the latest record per key: a run the archiver deleted
from Kafka left tombstones, and its references go with them) and every archived run's file (an
archived run still reads its payloads). The records are not decoded: a reference is found by its
marker in the record's bytes (``references_in``), so a payload inside a failure's details or a
heartbeat counts too. Sweep: every object in the payload store that nothing refers to and that is
older than ``grace_s`` is deleted. The grace covers payloads written for a command that is not
in a history yet (a start on its way, a task's result being committed); keep it longer than any
command takes to land (the default is a day).

A store shared by several namespaces must be collected over all of them (``namespaces``, or
``kadence payloads gc --all-namespaces``): an object one namespace no longer needs may be
another's.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kadence.topics.archive import ArchiveStore, decode_archive
from kadence.topics.catalogue import Catalogue
from kadence.topics.config import KafkaConfig
from kadence.topics.large_payloads import PAYLOAD_PREFIX, references_in
from kadence.topics.scan import scan

__all__ = ["GcReport", "collect_payloads", "namespaces_on"]

log = logging.getLogger(__name__)


@dataclass
class GcReport:
    namespaces: list[str]
    records_read: int = 0
    archives_read: int = 0
    referenced: int = 0
    objects: int = 0
    deleted: list[str] = field(default_factory=list)
    #: unreferenced, but younger than the grace period: kept this time
    young: int = 0
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespaces": self.namespaces,
            "records_read": self.records_read,
            "archives_read": self.archives_read,
            "referenced": self.referenced,
            "objects": self.objects,
            "deleted": len(self.deleted),
            "deleted_keys": self.deleted,
            "kept_young": self.young,
            "dry_run": self.dry_run,
        }


def namespaces_on(config: KafkaConfig, timeout: float = 30.0) -> list[str]:
    """Every namespace with a history topic on the broker."""
    topics = Catalogue(config).existing(timeout=timeout)
    return sorted(name[: -len(".history")] for name in topics if name.endswith(".history"))


def _live_in_topic(config: KafkaConfig, topic: str, report: GcReport, progress: Callable[[int], None]) -> set[str]:
    """The references of the latest record of each key of ``topic``."""
    by_key: dict[tuple[int, bytes | None], tuple[str, ...]] = {}
    for msg in scan(config, topic):
        report.records_read += 1
        progress(1)
        key = (msg.partition(), msg.key())
        value = msg.value()
        refs = tuple(references_in(value)) if value else ()
        if refs:
            by_key[key] = refs
        else:
            by_key.pop(key, None)  # a tombstone, or a newer record without references
    return {ref for refs in by_key.values() for ref in refs}


def _live_in_archive(store: ArchiveStore, namespace: str, report: GcReport) -> set[str]:
    live: set[str] = set()
    for key in store.list(f"{namespace}/"):
        data = store.get(key)
        if data is None:
            continue
        report.archives_read += 1
        for rec in decode_archive(data).records:  # a file that is no archive stops the sweep
            live.update(references_in(rec["value"]))
    return live


def collect_payloads(
    kafka: KafkaConfig,
    store: ArchiveStore,
    *,
    namespaces: Iterable[str],
    archive: ArchiveStore | None = None,
    grace_s: float = 24 * 3600,
    dry_run: bool = False,
    progress: Callable[[int], None] = lambda n: None,
    now: float | None = None,
) -> GcReport:
    """Delete the payload objects of ``store`` that no history, state or archive of
    ``namespaces`` refers to and that are older than ``grace_s`` (``dry_run``: report only)."""
    report = GcReport(namespaces=sorted(namespaces), dry_run=dry_run)
    live: set[str] = set()
    for ns in report.namespaces:
        topics = Catalogue(dataclasses.replace(kafka, namespace=ns))
        live |= _live_in_topic(kafka, topics.history, report, progress)
        live |= _live_in_topic(kafka, topics.state, report, progress)
        if archive is not None:
            live |= _live_in_archive(archive, ns, report)
    report.referenced = len(live)
    cutoff = (time.time() if now is None else now) - grace_s
    for key in store.list(PAYLOAD_PREFIX, suffix=".bin"):
        report.objects += 1
        digest = key.rsplit("/", 1)[-1][: -len(".bin")]
        if digest in live:
            continue
        modified = store.modified(key)
        if modified is None:
            continue
        if modified > cutoff:
            report.young += 1
            continue
        if not dry_run:
            store.delete(key)
        report.deleted.append(key)
    log.info(
        "payload gc over %s: %d objects, %d referenced, %d %s, %d younger than the grace period",
        ",".join(report.namespaces),
        report.objects,
        report.referenced,
        len(report.deleted),
        "to delete (dry run)" if dry_run else "deleted",
        report.young,
    )
    return report
