"""Task-queue rate limits (issue 46 item 1): how many activities a second a queue's workers
start, all of them together, for the queue as a whole and per activity type; and the queue's
concurrency rules (item 2): how many of its activities (of a type, or all: ``*``) execute at
once, which the processor turns into a concurrency limit of each activity it schedules
(``processors.concurrency``, decision 0057).

* ``{ns}.queue_limits`` (compacted, key = task queue) holds one ``QueueLimit`` record per queue:
  the owning team's limits, who set them, when and why. A record without limits lifts them (it
  still names who did; a tombstone would not). ``set_queue_limit`` writes one.
* Workers follow the topic (``kadence.sdk._rate_limit``) and pace the tasks they take from the
  queue's activity-task topic; a task beyond the limit waits in that topic, counted in the
  queue's backlog (``kadence.topics.backlog``), never dropped. Decision 0055 says why the
  limit is enforced where tasks are taken, and what that costs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from confluent_kafka import Producer

from kadence.schemas.records import ConcurrencyLimit

from . import serde
from .catalogue import Catalogue
from .concurrency import MAX_SLOTS, check_writable
from .config import KafkaConfig
from .errors import BrokerUnavailableError, InvalidArgumentError, KadenceError
from .identifiers import check_task_queue
from .records import now_ms
from .scan import scan

__all__ = [
    "MAX_ACTIVITIES_PER_SECOND",
    "QueueLimit",
    "decode_queue_limit",
    "limit_summary",
    "read_queue_limits",
    "set_queue_limit",
]

log = logging.getLogger(__name__)

#: the largest limit accepted: far above what a queue's workers start (a typo, not a limit)
MAX_ACTIVITIES_PER_SECOND = 1_000_000.0
#: the longest reason kept with a limit
MAX_REASON = 500
#: the most activity types one queue's record limits
MAX_ACTIVITY_TYPES = 100


def _rate(value: Any, what: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{what} must be a number of activities per second, not {value!r}", field=field)
    rate = float(value)
    if not math.isfinite(rate) or rate <= 0 or rate > MAX_ACTIVITIES_PER_SECOND:
        raise InvalidArgumentError(
            f"{what} must be above 0 and at most {MAX_ACTIVITIES_PER_SECOND:g} per second, not {value!r}", field=field
        )
    return rate


@dataclass(frozen=True)
class QueueLimit:
    """One task queue's limits in activities per second (None / absent: not limited)."""

    task_queue: str
    activities_per_second: float | None = None
    activity_types: Mapping[str, float] = field(default_factory=dict)
    timestamp_ms: int = 0
    identity: str = ""
    reason: str = ""
    #: activity type (``*``: every activity of the queue) -> at most this many executing at once
    activity_concurrency: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_task_queue(self.task_queue)
        if self.activities_per_second is not None:
            object.__setattr__(
                self,
                "activities_per_second",
                _rate(self.activities_per_second, "activities_per_second", "activities_per_second"),
            )
        if not isinstance(self.activity_types, Mapping):
            raise InvalidArgumentError(
                f"activity_types must map activity types to limits, not {self.activity_types!r}", field="activity_types"
            )
        if len(self.activity_types) > MAX_ACTIVITY_TYPES:
            raise InvalidArgumentError(
                f"at most {MAX_ACTIVITY_TYPES} activity types can have their own limit", field="activity_types"
            )
        types = {}
        for name, rate in self.activity_types.items():
            if not isinstance(name, str) or not name or len(name) > 200:
                raise InvalidArgumentError(
                    f"activity type {name!r} must be a name of 1-200 characters", field="activity_types"
                )
            types[name] = _rate(rate, f"the limit of activity type {name!r}", "activity_types")
        object.__setattr__(self, "activity_types", MappingProxyType(types))
        object.__setattr__(self, "activity_concurrency", MappingProxyType(_concurrency(self.activity_concurrency)))
        if not isinstance(self.reason, str) or len(self.reason) > MAX_REASON:
            raise InvalidArgumentError(f"reason must be text of at most {MAX_REASON} characters", field="reason")

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return self.activities_per_second is not None or bool(self.activity_types) or bool(self.activity_concurrency)

    def concurrency_of(self, activity_type: str) -> list[ConcurrencyLimit]:
        """The concurrency limits the queue's rules give an activity of this type."""
        out: list[ConcurrencyLimit] = []
        for rule in ("*", activity_type):
            if rule in self.activity_concurrency:
                value = self.task_queue if rule == "*" else f"{self.task_queue}/{rule}"
                out.append({"name": "queue", "value": value, "max": self.activity_concurrency[rule]})
        return out

    def limits_type(self, activity_type: str) -> bool:
        """Whether an activity of this type is paced (by the queue's limit or its own)."""
        return self.activities_per_second is not None or activity_type in self.activity_types

    def to_record(self) -> dict[str, Any]:
        return {
            "task_queue": self.task_queue,
            "activities_per_second": self.activities_per_second,
            "activity_types": dict(self.activity_types),
            "timestamp_ms": self.timestamp_ms,
            "identity": self.identity,
            "reason": self.reason,
            "activity_concurrency": dict(self.activity_concurrency),
        }

    def describe(self) -> dict[str, Any]:
        """The JSON shape shown by the CLI and the gateway."""
        return self.to_record()


def _concurrency(rules: Any) -> dict[str, int]:
    if not isinstance(rules, Mapping):
        raise InvalidArgumentError(
            f"activity_concurrency must map activity types to counts, not {rules!r}", field="activity_concurrency"
        )
    if len(rules) > MAX_ACTIVITY_TYPES:
        raise InvalidArgumentError(
            f"at most {MAX_ACTIVITY_TYPES} activity types can have a concurrency rule", field="activity_concurrency"
        )
    out = {}
    for name, top in rules.items():
        if not isinstance(name, str) or not name or len(name) > 200:
            raise InvalidArgumentError(
                f"activity type {name!r} must be a name of 1-200 characters ('*': all)", field="activity_concurrency"
            )
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= MAX_SLOTS:
            raise InvalidArgumentError(
                f"the concurrency of activity type {name!r} must be a whole number 1-{MAX_SLOTS}, not {top!r}",
                field="activity_concurrency",
            )
        out[name] = top
    return out


def decode_queue_limit(_key: str, value: bytes) -> QueueLimit:
    """A ``QueueLimit`` from its record; ``KadenceError`` when it is malformed."""
    r = serde.decode("QueueLimit", value)
    return QueueLimit(
        r["task_queue"],
        r.get("activities_per_second"),
        r.get("activity_types") or {},
        r["timestamp_ms"],
        r.get("identity", ""),
        r.get("reason", ""),
        r.get("activity_concurrency") or {},
    )


def set_queue_limit(
    config: KafkaConfig,
    task_queue: str,
    activities_per_second: float | None = None,
    activity_types: Mapping[str, float] | None = None,
    *,
    identity: str = "",
    reason: str = "",
    timeout: float = 30.0,
    activity_concurrency: Mapping[str, int] | None = None,
) -> QueueLimit:
    """Set ``task_queue``'s limits (none given: lift them); returns what was written.
    ``activity_concurrency``: activity type (``*``: all) -> at most this many executing at once,
    applied by the processors to activities they schedule from then on.

    Bad input raises ``InvalidArgumentError`` (or ``InvalidIdentifierError``) and writes nothing. The queue's workers apply the change
    within about a second; tasks already running are not interrupted."""
    if activity_concurrency:
        check_writable("a queue's concurrency rules")
    limit = QueueLimit(
        task_queue,
        activities_per_second,
        dict(activity_types or {}),
        now_ms(),
        identity,
        reason,
        dict(activity_concurrency or {}),
    )
    cat = Catalogue(config)
    cat.apply([s for s in cat.core_specs() if s.name == cat.queue_limits])
    producer = Producer(config.producer(**{"linger.ms": 0}))
    errors: list[Any] = []
    producer.produce(
        cat.queue_limits,
        serde.encode("QueueLimit", limit.to_record()),
        task_queue.encode(),
        on_delivery=lambda err, _m: errors.append(err),
    )
    left = producer.flush(timeout)
    if left or not errors or errors[0] is not None:
        raise BrokerUnavailableError(
            f"setting the limits of task queue {task_queue!r} failed: "
            f"{errors[0].str() if errors and errors[0] else 'not acknowledged'}"
        )
    log.info(
        "task queue %s: limits %s (by %r)",
        task_queue,
        limit_summary(limit),
        identity,
    )
    return limit


def limit_summary(limit: QueueLimit) -> str:
    """``20/s, charge=5/s`` ("lifted" when nothing is limited)."""
    if not limit.limited:
        return "lifted"
    parts = []
    if limit.activities_per_second is not None:
        parts.append(f"{limit.activities_per_second:g}/s")
    parts += [f"{t}={r:g}/s" for t, r in sorted(limit.activity_types.items())]
    parts += [f"{t}<={n} at once" for t, n in sorted(limit.activity_concurrency.items())]
    return ", ".join(parts)


def read_queue_limits(config: KafkaConfig) -> dict[str, QueueLimit]:
    """Task queue -> its latest limits (queues never limited, or whose record is unreadable,
    are absent)."""
    out: dict[str, QueueLimit] = {}
    for msg in scan(config, Catalogue(config).queue_limits):
        key = msg.key()
        if key is None:
            continue
        queue = key.decode(errors="replace")
        if msg.value() is None:
            out.pop(queue, None)
            continue
        try:
            out[queue] = decode_queue_limit(queue, msg.value())
        except KadenceError as exc:
            log.warning("ignoring the limits of task queue %r at offset %d: %s", queue, msg.offset(), exc)
    return out
