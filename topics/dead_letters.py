"""Dead letters: list, show and redrive records of ``{ns}.dlq``.

A redrive puts the original record (or an operator's repaired value) back on its origin topic
and writes a marker to the dead-letter topic in ONE transaction, so a record is redriven at most
once, whoever runs the command and however often.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig
from .errors import BrokerUnavailableError, KadenceError
from .records import now_ms
from .scan import scan

__all__ = ["DeadLetterEntry", "list_dead_letters", "redrive"]

_MARK = "redriven "


@dataclass(frozen=True)
class DeadLetterEntry:
    ref: str  # "partition:offset" in the dead-letter topic
    record: dict[str, Any]
    redriven: bool

    def summary(self) -> dict[str, Any]:
        """What a list shows: the reference, state, component, origin, reason and time (no value)."""
        r = self.record
        return {
            "ref": self.ref,
            "state": "redriven" if self.redriven else "pending",
            "component": r["component"],
            "origin": f"{r['origin_topic']}[{r['origin_partition']}]@{r['origin_offset']}",
            "origin_topic": r["origin_topic"],
            "origin_partition": r["origin_partition"],
            "origin_offset": r["origin_offset"],
            "timestamp_ms": r["timestamp_ms"],
            "reason": r["reason"],
            "key": r["key"].decode(errors="replace") if r["key"] else None,
        }


def _read(config: KafkaConfig) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{m.partition()}:{m.offset()}", serde.decode("DeadLetter", m.value()))
        for m in scan(config, Catalogue(config).dlq)
        if m.value()
    ]


def list_dead_letters(config: KafkaConfig) -> list[DeadLetterEntry]:
    """Every dead letter, oldest first per partition, with whether it was redriven."""
    records = _read(config)
    done = {
        r["reason"][len(_MARK) :] for _, r in records if r["component"] == "redrive" and r["reason"].startswith(_MARK)
    }
    return [DeadLetterEntry(ref, r, ref in done) for ref, r in records if r["component"] != "redrive"]


def redrive(config: KafkaConfig, ref: str, *, value: bytes | None = None, identity: str = "cli") -> DeadLetterEntry:
    """Put dead letter ``ref`` back on its origin topic, once (``value`` replaces a broken value)."""
    topics = Catalogue(config)
    producer = Producer(
        config.producer(**{"transactional.id": f"{config.namespace}.dlq-redrive", "transaction.timeout.ms": 10_000})
    )
    producer.init_transactions(30)  # fences any other redrive in progress
    entries = {e.ref: e for e in list_dead_letters(config)}
    entry = entries.get(ref)
    if entry is None:
        raise KadenceError(f"no dead letter {ref} in {topics.dlq}")
    if entry.redriven:
        raise KadenceError(f"dead letter {ref} was already redriven")
    rec = entry.record
    marker = {
        **rec,
        "reason": _MARK + ref,
        "component": "redrive",
        "timestamp_ms": now_ms(),
        "value": None,
        "error_type": identity,
    }
    try:
        producer.begin_transaction()
        producer.produce(rec["origin_topic"], value if value is not None else rec["value"], rec["key"])
        producer.produce(topics.dlq, serde.encode("DeadLetter", marker), rec["key"])
        producer.commit_transaction(30)
    except KafkaException as exc:
        raise BrokerUnavailableError(f"redrive of {ref} failed: {exc}") from exc
    return DeadLetterEntry(ref, rec, True)
