"""Standalone activities (decision 0063): an activity a client starts by its own ID, with no
workflow around it, and whose result is kept as a workflow run's is.

The engine holds one as a run keyed ``kadence-activity:{activity ID}`` (a prefix no workflow start
may use, so activity IDs do not meet workflow IDs), whose start carries the activity's options
(``StartWorkflow.activity``) and which has no workflow code: the history processor schedules the
activity in the start's transaction and closes the run with the activity's outcome. Everything
an activity has (retries, timeouts, heartbeats, async completion, concurrency limits, priority)
is the workflow activity's; everything a run has (one stable result per ID, reuse policies,
describe, cancel, terminate, history) is the run's.

This module is the one definition of the key, the policies and the start's body, shared by the
SDK, the gateway, the CLI and the processor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kadence.schemas.records import ActivityOptions, StartWorkflow

from . import serde
from .errors import ConfigError, InvalidArgumentError, InvalidIdentifierError
from .identifiers import MAX_ID_LENGTH, check_name, check_task_queue, problem
from .search_attributes import check_search_attributes

__all__ = [
    "ACTIVITY_CONFLICT_POLICIES",
    "ACTIVITY_ID_PREFIX",
    "ACTIVITY_KIND",
    "ACTIVITY_REUSE_POLICIES",
    "KIND_ATTRIBUTE",
    "MAX_ACTIVITY_ID_LENGTH",
    "STANDALONE_VERSION",
    "activity_id_of",
    "activity_key",
    "activity_start_body",
    "check_kind_unset",
    "is_activity_key",
    "listed_activity",
    "reuse_policy_of",
    "standalone_problem",
]

#: the search attribute that marks a standalone activity's run (``KadenceKind=activity``): the
#: visibility projection lists and counts them by it; reserved, a workflow start may not set it
KIND_ATTRIBUTE = "KadenceKind"
ACTIVITY_KIND = "activity"
#: the first schema version with ``StartWorkflow.activity``
STANDALONE_VERSION = 21
ACTIVITY_ID_PREFIX = "kadence-activity:"
MAX_ACTIVITY_ID_LENGTH = MAX_ID_LENGTH - len(ACTIVITY_ID_PREFIX)

#: what a start does when the ID's last run is closed (Temporal's ActivityIdReusePolicy)
ACTIVITY_REUSE_POLICIES = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate")
#: what a start does when the ID's run is open (Temporal's ActivityIdConflictPolicy): ``fail``
#: raises ``ActivityAlreadyStartedError``, ``use_existing`` returns the open run's handle,
#: ``terminate_existing`` terminates it and starts anew
ACTIVITY_CONFLICT_POLICIES = ("fail", "use_existing", "terminate_existing")


def check_kind_unset(search_attributes: Mapping[str, object] | None) -> None:
    """``InvalidArgumentError`` when a start's own search attributes name ``KIND_ATTRIBUTE``."""
    if KIND_ATTRIBUTE in (search_attributes or {}):
        raise InvalidArgumentError(
            f"the search attribute {KIND_ATTRIBUTE} is reserved: it marks standalone activities",
            field="search_attributes",
        )


def activity_key(activity_id: object, *, field: str = "id") -> str:
    """The engine's key of the standalone activity ``activity_id`` (``InvalidIdentifierError``
    naming ``field`` for an ID that is empty, too long or holds a control character)."""
    why = problem(activity_id, max_length=MAX_ACTIVITY_ID_LENGTH, slash=True)
    if why:
        raise InvalidIdentifierError(f"{field} {why}", field=field)
    return ACTIVITY_ID_PREFIX + str(activity_id)


def is_activity_key(key: str) -> bool:
    """Whether a workflow key is a standalone activity's."""
    return key.startswith(ACTIVITY_ID_PREFIX)


def activity_id_of(key: str) -> str:
    """The activity ID in a standalone activity's key."""
    return key[len(ACTIVITY_ID_PREFIX) :]


def reuse_policy_of(id_reuse_policy: str, id_conflict_policy: str) -> str:
    """The start's ``id_reuse_policy`` for an activity's reuse and conflict policies
    (``InvalidArgumentError`` for an unknown one; ``terminate_existing`` only with
    ``allow_duplicate``, as the engine's ``terminate_if_running`` admits any closed run)."""
    if id_reuse_policy not in ACTIVITY_REUSE_POLICIES:
        raise InvalidArgumentError(
            f"id_reuse_policy must be one of {', '.join(ACTIVITY_REUSE_POLICIES)}, not {id_reuse_policy!r}",
            field="id_reuse_policy",
        )
    if id_conflict_policy not in ACTIVITY_CONFLICT_POLICIES:
        raise InvalidArgumentError(
            f"id_conflict_policy must be one of {', '.join(ACTIVITY_CONFLICT_POLICIES)}, not {id_conflict_policy!r}",
            field="id_conflict_policy",
        )
    if id_conflict_policy == "terminate_existing":
        if id_reuse_policy != "allow_duplicate":
            raise InvalidArgumentError(
                "id_conflict_policy terminate_existing goes with id_reuse_policy allow_duplicate only",
                field="id_conflict_policy",
            )
        return "terminate_if_running"
    return id_reuse_policy


def _options_problem(options: Mapping[str, Any]) -> str | None:
    if not (options.get("start_to_close_timeout_ms") or options.get("schedule_to_close_timeout_ms")):
        return "a standalone activity needs a start_to_close or a schedule_to_close timeout"
    for name in ("start_to_close", "schedule_to_close", "schedule_to_start", "heartbeat"):
        value = options.get(f"{name}_timeout_ms")
        if value is not None and value <= 0:
            return f"{name}_timeout must be positive"
    return None


def standalone_problem(key: str, body: Mapping[str, Any]) -> str | None:
    """Why a start keyed ``key`` is not a valid standalone activity start, or a workflow start
    that carries activity options; None when it is what its key says it is."""
    options = body.get("activity")
    if not is_activity_key(key):
        if options is not None:
            return f"activity options are only for a standalone activity (a key {ACTIVITY_ID_PREFIX}{{id}})"
        if KIND_ATTRIBUTE in (body.get("search_attributes") or {}):
            return f"the search attribute {KIND_ATTRIBUTE} is reserved: it marks standalone activities"
        return None
    if options is None:
        return f"the prefix {ACTIVITY_ID_PREFIX!r} is for standalone activities: a workflow ID may not start with it"
    why = problem(activity_id_of(key), max_length=MAX_ACTIVITY_ID_LENGTH, slash=True)
    if why:
        return f"invalid activity ID: {why}"
    if options["task_queue"] != body["task_queue"]:
        return "a standalone activity's start names its task queue twice, differently"
    if body.get("cron_schedule") or body.get("debounce_ms") or body.get("eager_workflow_task"):
        return "a standalone activity takes no cron schedule, debounce or eager workflow task"
    if body.get("run_timeout_ms") or body.get("execution_timeout_ms") or body.get("concurrency"):
        return "a standalone activity's timeouts and limits are its activity options"
    return _options_problem(options)


def activity_start_body(
    activity_type: str,
    input: bytes,
    options: ActivityOptions,
    *,
    id_reuse_policy: str = "allow_duplicate",
    search_attributes: Mapping[str, object] | None = None,
    headers: Mapping[str, str] | None = None,
) -> StartWorkflow:
    """The ``StartWorkflow`` body of a standalone activity (``InvalidArgumentError`` or
    ``InvalidIdentifierError`` for bad input; nothing is sent)."""
    why = _options_problem(options)
    if why:
        raise InvalidArgumentError(why, field="timeouts")
    version = serde.write_version()
    if version < STANDALONE_VERSION:  # a rolling upgrade's first pass: the field would be dropped
        raise ConfigError(
            f"this process writes schema version {version} ({serde.WRITE_VERSION_ENV}); standalone activities "
            f"need version {STANDALONE_VERSION}: lift the pin once every instance runs this release"
        )
    check_kind_unset(search_attributes)
    return {
        "workflow_type": check_name(activity_type, field="activity type"),
        "task_queue": check_task_queue(options["task_queue"]),
        "input": input,
        "id_reuse_policy": id_reuse_policy,
        "run_timeout_ms": None,
        "search_attributes": check_search_attributes({**(search_attributes or {}), KIND_ATTRIBUTE: ACTIVITY_KIND}),
        "execution_timeout_ms": None,
        "memo": {},
        "headers": dict(headers or {}),
        "activity": options,
    }


def listed_activity(record: Mapping[str, Any]) -> dict[str, Any]:
    """A visibility record (``kadence.readmodels.visibility``) of a standalone activity's run, as
    the activity lists show it (``GET /v1/activities``, ``kadence activity list``)."""
    return {
        "activity_id": activity_id_of(record["workflow_id"]),
        "run_id": record["run_id"],
        "activity_type": record["workflow_type"],
        "task_queue": record.get("task_queue"),
        "status": record["status"],
        "start_time_ms": record.get("start_time_ms"),
        "close_time_ms": record.get("close_time_ms"),
        "search_attributes": {k: v for k, v in (record.get("search_attributes") or {}).items() if k != KIND_ATTRIBUTE},
    }
