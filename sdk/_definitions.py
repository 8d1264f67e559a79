"""Definition objects for workflows and activities, validated once at decoration time."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kadence.schemas.records import ConcurrencyLimit
from kadence.schemas.records import Priority as PriorityRecord
from kadence.topics.concurrency import check_limits, check_records_writable
from kadence.topics.errors import ConfigError, DefinitionError, InvalidArgumentError
from kadence.topics.priority import check_priority, priority_problem

__all__ = [
    "ActivityDefinition",
    "Limit",
    "Priority",
    "RetryPolicy",
    "WorkflowDefinition",
    "activity_definition",
    "failure_types",
    "limit_records",
    "priority_record",
    "registrations",
    "run_function",
    "to_ms",
    "workflow_definition",
    "workflow_type_name",
]


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How the engine retries a failed activity attempt."""

    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    maximum_interval: timedelta | None = None
    #: 0 means unlimited
    maximum_attempts: int = 0
    non_retryable_error_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.initial_interval <= timedelta(0):
            raise ConfigError("RetryPolicy.initial_interval must be positive")
        if self.backoff_coefficient < 1:
            raise ConfigError("RetryPolicy.backoff_coefficient must be >= 1")
        if self.maximum_attempts < 0:
            raise ConfigError("RetryPolicy.maximum_attempts must be >= 0 (0 = unlimited)")
        if self.maximum_interval is not None and self.maximum_interval < self.initial_interval:
            raise ConfigError("RetryPolicy.maximum_interval must be >= initial_interval")

    def to_record(self) -> dict[str, Any]:
        return {
            "initial_interval_ms": to_ms(self.initial_interval),
            "backoff_coefficient": float(self.backoff_coefficient),
            "maximum_interval_ms": to_ms(self.maximum_interval),
            "maximum_attempts": self.maximum_attempts,
            "non_retryable_error_types": list(self.non_retryable_error_types),
        }


@dataclass(frozen=True)
class Limit:
    """A concurrency limit: at most ``max`` runs (or activities) that name the key
    ``name=value`` execute at once, across the namespace; the others wait, first come first
    served (``concurrency=`` of a start or of ``workflow.execute_activity``; docs/guide.md,
    "Concurrency limits"). ``Limit("tenant", tenant_id, max=20)``; ``max=1`` runs them one at a
    time.

    With ``per``, a rate limit instead: at most ``max`` of them start in any window of ``per``
    (``Limit("api", "stripe", max=10, per=timedelta(seconds=1))``); the others are delayed, in
    the order they asked, not dropped ("Rate limits per key" in the guide).

    ``InvalidArgumentError`` for an empty name or value, a name with ``=``, a max outside
    1-1,000,000 (1-10,000 for a rate), or a window outside 10 ms to 7 days."""

    name: str
    value: str
    max: int
    per: timedelta | None = None

    def __post_init__(self) -> None:
        if self.per is not None and not isinstance(self.per, timedelta):
            raise InvalidArgumentError(f"Limit.per takes a timedelta, not {type(self.per).__name__}")
        check_limits([self.to_record()])

    def to_record(self) -> ConcurrencyLimit:
        per = None if self.per is None else round(self.per.total_seconds() * 1000)
        return {"name": self.name, "value": self.value, "max": self.max, "per_ms": per}


@dataclass(frozen=True)
class Priority:
    """How a run's or an activity's tasks are ordered when their task queue has a backlog
    (``priority=`` of a start, a child or ``workflow.execute_activity``; docs/guide.md,
    "Priority and fairness"), as Temporal's ``Priority``:

    ``priority_key``: 1 (first) to 5 (last), default 3. A worker with tasks of several levels
    waiting dispatches them by weight (16, 8, 4, 2, 1 per turn): level 1 first, level 5 never
    starved. ``fairness_key`` (a tenant, say): within a level, the keys share the dispatches in
    proportion to ``fairness_weight`` (default 1), so one key's burst does not hold back the
    others. A field left unset is inherited: an activity's and a child's from the run, a
    continued run's from the run before. ``priority=1`` is short for ``Priority(priority_key=1)``.

    ``InvalidArgumentError`` for a level outside 1-5, a weight outside (0, 1000], or a fairness
    key that is empty, longer than 255 characters or holds control characters."""

    priority_key: int | None = None
    fairness_key: str | None = None
    fairness_weight: float | None = None

    def __post_init__(self) -> None:
        if self.priority_key == 0 or self.fairness_weight == 0:
            raise InvalidArgumentError(
                "priority_key is 1 to 5 and fairness_weight above 0 (leave a field None to inherit it)"
            )
        why = priority_problem(self._raw())
        if why:
            raise InvalidArgumentError(why)

    def _raw(self) -> PriorityRecord:
        return {
            "priority_key": self.priority_key or 0,
            "fairness_key": self.fairness_key,
            "fairness_weight": self.fairness_weight or 0.0,
        }

    @classmethod
    def from_record(cls, record: PriorityRecord | None) -> Priority | None:
        """The ``Priority`` of a wire record (None: none, every field unset, or one a producer
        that bypassed the checks wrote out of range: its task went to the default lane)."""
        if not record or priority_problem(record):
            return None
        return cls(
            record.get("priority_key") or None,
            record.get("fairness_key"),
            record.get("fairness_weight") or None,
        )

    def to_record(self) -> PriorityRecord | None:
        """The wire record (None when every field is unset), checked as the engine checks it."""
        return check_priority(self._raw())


def priority_record(value: Priority | int | None) -> PriorityRecord | None:
    """The record of a ``priority=`` argument: a ``Priority``, a level (1-5) or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (Priority, int)):
        raise InvalidArgumentError(f"priority takes a kadence.Priority or a level 1-5, not {type(value).__name__}")
    return (value if isinstance(value, Priority) else Priority(priority_key=value)).to_record()


def limit_records(limits: Iterable[Limit] | None) -> list[ConcurrencyLimit]:
    """The records of a ``concurrency=`` argument, checked as a whole (at most 8, no key twice)."""
    if limits is None:
        return []
    records = []
    for lim in limits:
        if not isinstance(lim, Limit):
            raise InvalidArgumentError(f"concurrency takes kadence.Limit values, not {type(lim).__name__}")
        records.append(lim.to_record())
    checked = check_limits(records)
    check_records_writable(checked)
    return checked


def to_ms(value: timedelta | float | int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, (int, float)):
        return int(value * 1000)
    raise ConfigError(f"expected a timedelta or seconds, got {type(value).__name__}")


@dataclass(frozen=True)
class WorkflowDefinition:
    name: str
    cls: type
    run_fn: Callable[..., Any]
    signals: dict[str, Any] = field(default_factory=dict)
    queries: dict[str, Any] = field(default_factory=dict)
    #: update name -> handler (its validator, if any, is the handler's ``__kadence_update_validator__``)
    updates: dict[str, Any] = field(default_factory=dict)
    #: exception types that fail the run when its code raises them, besides ``FailureError``
    #: (``@workflow.defn(failure_exception_types=...)``); anything else fails the workflow task
    failure_exception_types: tuple[type[BaseException], ...] = ()


@dataclass(frozen=True)
class ActivityDefinition:
    name: str
    fn: Callable[..., Any]
    is_async: bool


def failure_types(types: Iterable[Any], what: str) -> tuple[type[BaseException], ...]:
    """``failure_exception_types`` checked: exception classes only (``DefinitionError`` naming
    ``what`` otherwise)."""
    checked = tuple(types)
    for t in checked:
        if not (inspect.isclass(t) and issubclass(t, BaseException)):
            raise DefinitionError(f"{what}: failure_exception_types takes exception classes, not {t!r}")
    return checked


def workflow_definition(cls: type, name: str | None, failure_exception_types: Iterable[Any] = ()) -> WorkflowDefinition:
    if not inspect.isclass(cls):
        raise DefinitionError("@workflow.defn decorates a class")
    runs = [m for m in vars(cls).values() if getattr(m, "__kadence_run__", False)]
    if len(runs) != 1:
        raise DefinitionError(f"workflow {cls.__name__} needs exactly one @workflow.run method, found {len(runs)}")
    run_fn = runs[0]
    if not inspect.iscoroutinefunction(run_fn):
        raise DefinitionError(f"{cls.__name__}.{run_fn.__name__}: @workflow.run must be an async def")
    try:
        cls()
    except TypeError as exc:
        raise DefinitionError(f"workflow {cls.__name__} must be constructible without arguments: {exc}") from exc
    signals = {m.__kadence_signal__: m for m in vars(cls).values() if getattr(m, "__kadence_signal__", None)}
    queries = {m.__kadence_query__: m for m in vars(cls).values() if getattr(m, "__kadence_query__", None)}
    updates = {m.__kadence_update__: m for m in vars(cls).values() if getattr(m, "__kadence_update__", None)}
    return WorkflowDefinition(
        name or cls.__name__,
        cls,
        run_fn,
        signals,
        queries,
        updates,
        failure_types(failure_exception_types, f"workflow {cls.__name__}"),
    )


def activity_definition(fn: Callable[..., Any], name: str | None) -> ActivityDefinition:
    if not callable(fn):
        raise DefinitionError("@activity.defn decorates a function")
    return ActivityDefinition(name or fn.__name__, fn, inspect.iscoroutinefunction(fn))


def workflow_type_name(workflow: Any) -> str:
    """The type name of a workflow given as its class, its run method or a string."""
    if isinstance(workflow, str):
        if not workflow:
            raise DefinitionError("workflow type name is empty")
        return workflow
    defn = getattr(workflow, "__kadence_workflow__", None)
    if defn is None and getattr(workflow, "__kadence_run__", False):
        owner = getattr(workflow, "__kadence_owner__", None)
        defn = getattr(owner, "__kadence_workflow__", None) if owner else None
        if defn is None:
            qual = workflow.__qualname__.split(".")
            if len(qual) >= 2:
                name: str = qual[-2]
                return name
    if defn is None:
        raise DefinitionError(f"{workflow!r} is not a @workflow.defn class, its run method, or a type name")
    defined: str = defn.name
    return defined


def run_function(workflow: Any) -> Callable[..., Any] | None:
    """The run method of a workflow given as its class or its run method (its parameter and
    return types type the payloads); None for a type name."""
    defn = getattr(workflow, "__kadence_workflow__", None)
    if defn is not None:
        run_fn: Callable[..., Any] = defn.run_fn
        return run_fn
    if getattr(workflow, "__kadence_run__", False):
        method: Callable[..., Any] = workflow
        return method
    return None


def _takes_self(fn: Callable[..., Any]) -> bool:
    """A function defined in a class body whose first parameter is ``self`` (an instance method
    taken from its class, which the worker could not call)."""
    parts = getattr(fn, "__qualname__", "").split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return False
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] == "self"


def registrations(
    workflows: Iterable[Any], activities: Iterable[Any]
) -> tuple[dict[str, WorkflowDefinition], dict[str, ActivityDefinition]]:
    """The definitions of ``@workflow.defn`` classes and ``@activity.defn`` functions, by name
    (a later one of the same name replaces an earlier one); ``DefinitionError`` for anything else,
    or when both are empty. What a ``Worker`` and ``kadence.testing`` register."""
    by_workflow: dict[str, WorkflowDefinition] = {}
    for w in workflows:
        d = getattr(w, "__kadence_workflow__", None)
        if d is None:
            raise DefinitionError(f"{w!r} is not a @workflow.defn class")
        by_workflow[d.name] = d
    by_activity: dict[str, ActivityDefinition] = {}
    for a in activities:
        d = getattr(a, "__kadence_activity__", None)
        if d is None:
            raise DefinitionError(f"{a!r} is not an @activity.defn function")
        if inspect.ismethod(a):  # an @activity.defn method of an instance: call it bound
            d = ActivityDefinition(d.name, a, d.is_async)
        elif _takes_self(d.fn):
            raise DefinitionError(
                f"activity {d.name!r} is a method: register it bound to an instance "
                f"(activities=[{d.fn.__qualname__.split('.')[-2]}(...).{d.fn.__name__}]), not from its class"
            )
        by_activity[d.name] = d
    if not by_workflow and not by_activity:
        raise DefinitionError("a worker needs at least one workflow or activity")
    return by_workflow, by_activity
