"""Test namespaces on the one dev broker: each integration test makes its own (its topics, with
their partitions), and a full run makes hundreds. The broker holds a file open per partition
segment, and this machine allows it 20,000 (`ulimit -Hn`): with a topic per priority lane
(decision 0060) the run's partitions passed that and the broker died mid-run. A test's namespace
is dropped when the test ends."""

from __future__ import annotations

from confluent_kafka import KafkaException

from kadence.topics import Catalogue, KafkaConfig

__all__ = ["drop_namespace"]


def drop_namespace(config: KafkaConfig, timeout: float = 30.0) -> None:
    """Delete every topic of ``config``'s namespace (waits for the broker to accept it)."""
    cat = Catalogue(config)
    admin = cat.admin()
    try:
        names = sorted(cat.existing(admin, timeout))
    except Exception:  # noqa: BLE001 - the broker is gone: nothing to free
        return
    if not names:
        return
    for fut in admin.delete_topics(names, operation_timeout=timeout).values():
        try:
            fut.result(timeout)
        except KafkaException:  # already gone
            pass
