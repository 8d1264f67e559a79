"""Worker builds (build-ID pinning), shared by the processor, the SDK's worker and the CLI.

* A build ID names one deployment of a task queue's workflow code: ``[A-Za-z0-9][A-Za-z0-9_-]*``,
  at most 64 characters (no dots: the build is the last segment of its topic's name).
* ``{ns}.builds`` (compacted, key = task queue) holds ``BuildDefault`` records: the build that
  NEW workflows of the queue start on (null: unversioned). ``promote_build`` writes one.
* A run pinned to build B gets its workflow tasks on ``{ns}.tasks.build.{queue}.{B}``, consumed by
  the group ``{ns}.worker.build.{queue}.{B}``; its backlog is the topic's end offsets minus that
  group's committed offsets. Tasks for a build no worker serves stay there, visible as backlog
  (``kadence.topics.backlog``), until workers of the build return or an operator moves the workflows.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from . import serde
from .catalogue import Catalogue
from .config import KafkaConfig
from .errors import BrokerUnavailableError, ConfigError
from .records import now_ms
from .scan import scan

__all__ = [
    "BUILD_ID_RE",
    "BuildBacklog",
    "build_topics",
    "promote_build",
    "read_build_defaults",
    "validate_build_id",
]

log = logging.getLogger(__name__)

BUILD_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def validate_build_id(build_id: str | None, *, allow_none: bool = False) -> str | None:
    """The build ID if it is well formed; ``ConfigError`` naming the rule otherwise."""
    if build_id is None and allow_none:
        return None
    if not isinstance(build_id, str) or not BUILD_ID_RE.match(build_id):
        raise ConfigError(
            f"build ID {build_id!r} is invalid: use 1-64 characters from A-Z a-z 0-9 _ -, "
            "starting with a letter or digit (no dots: e.g. v1_4_2 or a commit hash)"
        )
    return build_id


def promote_build(
    config: KafkaConfig, task_queue: str, build_id: str | None, *, identity: str = "", timeout: float = 30.0
) -> dict[str, Any]:
    """Make ``build_id`` the build that new workflows of ``task_queue`` start on (None: unversioned).

    Open workflows stay on the build they are pinned to. Creates the build's task topic first, so
    that tasks dispatched before its workers start wait there. Returns the record written."""
    if not task_queue:
        raise ConfigError("task queue must be a non-empty string")
    validate_build_id(build_id, allow_none=True)
    cat = Catalogue(config)
    cat.apply([s for s in cat.core_specs() if s.name == cat.builds])
    if build_id is not None:
        cat.ensure_build(task_queue, build_id)
    record = {
        "task_queue": task_queue,
        "build_id": build_id,
        "timestamp_ms": now_ms(),
        "identity": identity,
    }
    producer = Producer(config.producer(**{"linger.ms": 0}))
    errors: list[Any] = []
    producer.produce(
        cat.builds,
        serde.encode("BuildDefault", record),
        task_queue.encode(),
        on_delivery=lambda err, _m: errors.append(err),
    )
    left = producer.flush(timeout)
    if left or not errors or errors[0] is not None:
        raise BrokerUnavailableError(
            f"promoting build {build_id!r} of {task_queue!r} failed: "
            f"{errors[0].str() if errors and errors[0] else 'not acknowledged'}"
        )
    log.info("task queue %s: new workflows start on build %s", task_queue, build_id or "(unversioned)")
    return record


def read_build_defaults(config: KafkaConfig) -> dict[str, dict[str, Any]]:
    """Task queue -> its latest ``BuildDefault`` record."""
    out: dict[str, dict[str, Any]] = {}
    for msg in scan(config, Catalogue(config).builds):
        if msg.key() is None:
            continue
        if msg.value() is None:
            out.pop(msg.key().decode(), None)
        else:
            out[msg.key().decode()] = serde.decode("BuildDefault", msg.value())
    return out


def build_topics(cat: Catalogue, have: dict[str, int]) -> list[tuple[str, str | None, str]]:
    """(task queue, build ID or None for the unversioned queue, topic) of every workflow-task topic."""
    ns = cat.config.namespace
    unversioned, versioned = f"{ns}.tasks.workflow.", cat.build_tasks_prefix()
    out: list[tuple[str, str | None, str]] = []
    for name in sorted(have):
        if name.startswith(unversioned):
            out.append((name[len(unversioned) :], None, name))
        elif name.startswith(versioned) and "." in name[len(versioned) :]:
            queue, build = name[len(versioned) :].rsplit(".", 1)
            out.append((queue, build, name))
    return out


@dataclass(frozen=True)
class BuildBacklog:
    task_queue: str
    #: None: the queue's unversioned workflow tasks
    build_id: str | None
    topic: str
    #: new workflows of the queue start on this build
    is_default: bool
    #: workflow tasks waiting for a worker of this build (end offsets minus committed offsets)
    backlog: int
    #: seconds since the oldest waiting task was dispatched (None: nothing waits, or not measured)
    oldest_age_s: float | None
