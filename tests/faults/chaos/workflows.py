"""Sample workflows of the chaos suite, and their activities.

Every activity records, in Redis under the run's key prefix (``KADENCE_CHAOS_PREFIX``):

* each execution of each attempt: ``RPUSH {prefix}:attempts "{idempotency_key}|{attempt}"``;
* its business effect, once per idempotency key: ``SET NX {prefix}:effect:{key}`` and, only when
  that SET created the key, ``RPUSH {prefix}:ledger key`` (atomically, in one Lua script).

So the checker can prove that each activity's effect happened once, and that the attempts the
workers ran match the attempts in history. Results are deterministic from the input, so the
checker knows every workflow's right result (``expected_result``).
"""

from __future__ import annotations

import os
import random
import time
from datetime import timedelta

from kadence import Limit, Priority, RetryPolicy, activity, workflow

#: a worker killed mid-activity leaves an attempt that times out after this and is retried
ACTIVITY_TIMEOUT = timedelta(seconds=5)
RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=2)
)

_EFFECT_ONCE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  return 1
end
return 0
"""

_redis = None


def _client():
    global _redis
    if _redis is None:
        import redis

        _redis = redis.Redis.from_url(os.environ["KADENCE_REDIS_URL"])
    return _redis


def _record(tag: str) -> None:
    """Log this attempt, pause a little (a window for kills mid-activity), apply the effect once."""
    info = activity.info()
    prefix = os.environ["KADENCE_CHAOS_PREFIX"]
    r = _client()
    key = info.idempotency_key
    r.rpush(f"{prefix}:attempts", f"{key}|{info.attempt}")
    time.sleep(random.uniform(0.02, 0.3))
    r.eval(_EFFECT_ONCE, 2, f"{prefix}:effect:{key}", f"{prefix}:ledger", tag, key)


@activity.defn
def reserve(n: int) -> int:
    _record(f"reserve {n}")
    return n + 1


#: what each attempt of ``charge`` publishes on its workflow's stream (decision 0062): only the
#: accepted attempt's values may be on {ns}.streams, each once (``checker.check_streams``)
CHARGE_PUBLISHES = 3
STREAM = "progress"


def charge_values(amount: int, attempt: int) -> list[str]:
    return [f"charge {amount} attempt {attempt} part {i}/{CHARGE_PUBLISHES}" for i in range(CHARGE_PUBLISHES)]


@activity.defn
def charge(amount: int) -> int:
    for value in charge_values(amount, activity.info().attempt):
        activity.publish(STREAM, value)
    _record(f"charge {amount}")
    return 2 * amount


@activity.defn
def ship(value: int) -> int:
    _record(f"ship {value}")
    return value + 100


@activity.defn
async def label(value: int) -> str:
    """A local activity (decision 0043): run inside the workflow task, recorded as a marker; no
    effect of its own (it runs at least once), its result checked through the workflow's."""
    return f"L{value}"


def _act(fn, arg, concurrency=None, priority=None):
    return workflow.execute_activity(
        fn,
        arg,
        start_to_close_timeout=ACTIVITY_TIMEOUT,
        retry_policy=RETRY,
        concurrency=concurrency,
        priority=priority,
    )


def run_priority(n: int) -> Priority | None:
    """Most orders have a priority level (each a lane of its own, decision 0060) and a tenant's
    fairness key, which their activities and children inherit; every fifth has none (level 3)."""
    if n % 5 == 0:
        return None
    return Priority((1, 2, 4, 5)[n % 5 - 1], fairness_key=f"tenant-{n % 3}", fairness_weight=1.0 + n % 2)


def ship_priority(n: int) -> int | None:
    """Some shipments jump to level 1 (an activity's own level over its run's)."""
    return 1 if n % 4 == 3 else None


def run_limits(n: int) -> list[Limit]:
    """Some orders hold a slot of their tenant's concurrency limit (decision 0057) for their
    whole run, some are admitted by their region's start rate (decision 0058: 1 a second, so a
    burst is delayed); the checker counts the holders of each key, and each rate's admissions
    in every window, from the histories."""
    if n % 6 == 4:
        return [Limit("tenant", f"t{n % 4}", max=4)]
    if n % 6 == 1:
        return [Limit("region", f"r{n % 12 // 6}", max=1, per=timedelta(seconds=1))]
    return []


def charge_limits(n: int) -> list[Limit] | None:
    """Odd orders' charge holds a slot of the payment API's limit (an activity's); some of them
    are admitted by the ledger's call rate too."""
    if n % 2 == 0:
        return None
    return [Limit("api", "pay", max=3)] + (
        [Limit("api", "ledger", max=4, per=timedelta(seconds=1))] if n % 4 == 1 else []
    )


def timer_seconds(n: int) -> int | None:
    """Half the orders wait on a durable timer of 1-3 s."""
    return 1 + n % 3 if n % 2 == 0 else None


def wants_signal(n: int) -> bool:
    return n % 3 == 0


def wants_update(n: int) -> bool:
    return n % 4 == 1


def update_result(n: int) -> int:
    """What the ``bump`` update of order ``n`` returns (its handler runs an activity)."""
    return 1000 + n + 1


def standalone(n: int) -> bool:
    """Some orders are no workflow: a standalone ``charge`` activity (decision 0063) started by
    its own ID, twice with one request ID (one run), its result read by two callers at once; the
    checker holds its run to the same invariants as a workflow's (one completion with the
    expected result, one effect, the accepted attempt's stream values only)."""
    return n % 11 == 5 and not wants_signal(n) and not wants_update(n) and not executed(n)


def standalone_id(n: int) -> str:
    return f"charge-{n}"


def executed(n: int) -> bool:
    """Some orders without a signal or an update are run by ``execute_workflow``: one command
    whose start carries its result request (decision 0052), retried with the same start request
    ID (a resent start registers the new result request)."""
    return n % 7 == 3 and not wants_signal(n) and not wants_update(n)


def eager(n: int) -> bool:
    """Some orders are started with ``request_eager_start`` (issue 45): a worker in the driver's
    process runs the first workflow task before the start is sent. Half of them race an ordinary
    start with the same request ID, and half follow a first task run for the same workflow ID
    whose start was never sent (a client that crashed between its local task and its start)."""
    return n % 5 == 2 and not executed(n)


#: a debounced order's wait (long enough that the burst's last start, retried through a fault,
#: still joins the run)
DEBOUNCE_S = 30


def debounced(n: int) -> bool:
    """Some orders are started by a burst of debounced starts (decision 0059): two with a stale
    input, then the order's own; the run must be one, with the last input (its result says)."""
    return n % 10 == 9 and not executed(n)


def has_child(n: int) -> bool:
    return n % 5 == 0


def approval_for(n: int) -> str:
    return f"ok-{n}"


@workflow.defn
class ChaosChild:
    @workflow.run
    async def run(self, n: int) -> int:
        return await _act(reserve, 10 * n)


@workflow.defn
class ChaosOrder:
    """reserve, charge (which publishes on the stream), label (a local activity), [timer], [wait
    for the 'approve' signal], [wait for the 'bump' update], [child], ship; the run publishes
    on the stream at its start and before it returns."""

    def __init__(self) -> None:
        self.approval: str | None = None
        self.bump_result: int | None = None

    @workflow.signal
    def approve(self, note: str) -> None:
        self.approval = note

    @workflow.update
    async def bump(self, k: int) -> int:
        self.bump_result = await _act(reserve, 1000 + k)
        return self.bump_result

    @bump.validator
    def _valid_bump(self, k: int) -> None:
        if k < 0:
            raise ValueError(f"a bump is not negative, got {k}")

    @workflow.run
    async def run(self, n: int) -> dict:
        workflow.publish(STREAM, f"order {n} started")
        a = await _act(reserve, n)
        b = await _act(charge, a, charge_limits(n))
        tag = await workflow.execute_local_activity(label, b)
        if timer_seconds(n):
            await workflow.sleep(timer_seconds(n))
        approval = None
        if wants_signal(n):
            await workflow.wait_condition(lambda: self.approval is not None)
            approval = self.approval
        if wants_update(n):
            await workflow.wait_condition(lambda: self.bump_result is not None)
        child = await workflow.execute_child_workflow(ChaosChild, n) if has_child(n) else None
        shipped = await _act(ship, b, priority=ship_priority(n))
        workflow.publish(STREAM, f"order {n} shipped {shipped}")
        return {
            "n": n,
            "shipped": shipped,
            "approval": approval,
            "child": child,
            "bump": self.bump_result,
            "label": tag,
        }


def expected_result(n: int) -> dict:
    return {
        "n": n,
        "shipped": 2 * (n + 1) + 100,
        "approval": approval_for(n) if wants_signal(n) else None,
        "child": 10 * n + 1 if has_child(n) else None,
        "bump": update_result(n) if wants_update(n) else None,
        "label": f"L{2 * (n + 1)}",
    }


#: cron workflows of every seed (``tick-<k>``): each time of the schedule, a run that records one
#: activity effect; the checker follows each chain (``checker.check_crons``)
CRON_WORKFLOWS = 3
CRON_PERIOD_S = 4
CRON_SCHEDULE = f"@every {CRON_PERIOD_S}s"


def cron_id(k: int) -> str:
    return f"tick-{k}"


#: schedules (``kadence.operations.schedules``) under the faults: each starts a ChaosTick every
#: SCHEDULE_EVERY_MS, allow_all, so every time in its life must have exactly one run
SCHEDULES = 2
SCHEDULE_EVERY_MS = 2000


def schedule_name(k: int) -> str:
    return f"sched-{k}"


@workflow.defn
class ChaosTick:
    @workflow.run
    async def run(self, k: int) -> int:
        return await _act(reserve, 100_000 + k)


WORKFLOWS = [ChaosOrder, ChaosChild, ChaosTick]
ACTIVITIES = [reserve, charge, ship, label]
TASK_QUEUE = "chaos"
