"""Workflows and activities used by the integration tests."""

from __future__ import annotations

import asyncio
import collections
import threading
from datetime import timedelta

from kadence import activity, workflow

T = timedelta(seconds=30)

#: activity idempotency key -> number of executions, to prove effects happen once
EFFECTS: collections.Counter = collections.Counter()
#: workflow id -> event that a `gate` activity waits for
GATES: dict[str, asyncio.Event] = {}


@activity.defn
async def add(x: int, y: int) -> int:
    EFFECTS[activity.info().idempotency_key] += 1
    return x + y


#: cleared by a drill to hold every ``ThreeSteps`` at its second step (``double`` waits, at most
#: 20 s, well inside its 30 s timeout) until the fault is in place; open otherwise
DOUBLE_OPEN = threading.Event()
DOUBLE_OPEN.set()


@activity.defn
def double(x: int) -> int:
    DOUBLE_OPEN.wait(20)
    EFFECTS[activity.info().idempotency_key] += 1
    return 2 * x


@activity.defn
async def gate(tag: str) -> str:
    """Waits until the test opens the gate of this workflow."""
    event = GATES.setdefault(activity.info().workflow_id, asyncio.Event())
    await event.wait()
    return f"opened:{tag}"


@activity.defn
async def boom(message: str) -> None:
    raise ValueError(message)


@workflow.defn
class ThreeSteps:
    @workflow.run
    async def run(self, n: int) -> int:
        a = await workflow.execute_activity(add, n, 1, start_to_close_timeout=T)
        b = await workflow.execute_activity(double, a, start_to_close_timeout=T)
        c = await workflow.execute_activity(add, b, 100, start_to_close_timeout=T)
        return c  # 2 * (n + 1) + 100


def three_steps_result(n: int) -> int:
    return 2 * (n + 1) + 100


@workflow.defn(name="Gated")
class Gated:
    """add, then wait at a gate (activity on the 'gates' queue), then double."""

    @workflow.run
    async def run(self, n: int) -> list:
        a = await workflow.execute_activity(add, n, 1, start_to_close_timeout=T)
        opened = await workflow.execute_activity(gate, "g", task_queue="gates", start_to_close_timeout=T)
        b = await workflow.execute_activity(double, a, start_to_close_timeout=T)
        return [a, opened, b]


@workflow.defn(name="Gated")
class GatedChanged:
    """The same type with a non-replay-safe change: the first activity is now `double`."""

    @workflow.run
    async def run(self, n: int) -> list:
        a = await workflow.execute_activity(double, n, start_to_close_timeout=T)
        opened = await workflow.execute_activity(gate, "g", task_queue="gates", start_to_close_timeout=T)
        b = await workflow.execute_activity(double, a, start_to_close_timeout=T)
        return [a, opened, b]


@workflow.defn
class Failing:
    @workflow.run
    async def run(self, message: str) -> None:
        from kadence import RetryPolicy

        await workflow.execute_activity(
            boom,
            message,
            start_to_close_timeout=T,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=2),
        )


# ---- durable-execution semantics (timers, retries, timeouts, signals, cancellation)

#: per test: activity attempts seen, as (idempotency_key, attempt, monotonic time)
ATTEMPTS: list = []


@activity.defn
async def fails_twice(tag: str) -> str:
    info = activity.info()
    import time as _time

    ATTEMPTS.append((info.idempotency_key, info.attempt, _time.time()))
    if info.attempt < 3:
        raise ConnectionError(f"transient failure {info.attempt}")
    return f"{tag} after {info.attempt} attempts"


@activity.defn
async def slow_then_fast(tag: str) -> str:
    """Attempt 1 outlives its start-to-close timeout and completes late; attempt 2 is quick."""
    info = activity.info()
    ATTEMPTS.append((info.idempotency_key, info.attempt, 0))
    if info.attempt == 1:
        await asyncio.sleep(2.5)
    return f"{tag}:attempt{info.attempt}"


@activity.defn
async def never_returns(tag: str) -> str:
    """Outlives any start-to-close timeout the tests give it."""
    ATTEMPTS.append((activity.info().idempotency_key, activity.info().attempt, 0))
    await asyncio.sleep(120)
    return tag


@workflow.defn
class GivesUpAfterTimeout:
    """One attempt with a start-to-close timeout of ``seconds``; the timeout is the result."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        from kadence import ActivityError, RetryPolicy

        try:
            return await workflow.execute_activity(
                never_returns,
                "x",
                start_to_close_timeout=timedelta(seconds=seconds),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError as err:
            return f"gave up: {err}"


@workflow.defn
class RetryOnce:
    @workflow.run
    async def run(self) -> str:
        from kadence import RetryPolicy

        return await workflow.execute_activity(
            fails_twice,
            "paid",
            start_to_close_timeout=T,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=300), backoff_coefficient=2.0),
        )


@workflow.defn
class LateCompletion:
    @workflow.run
    async def run(self) -> str:
        from kadence import RetryPolicy

        return await workflow.execute_activity(
            slow_then_fast,
            "x",
            start_to_close_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3),
        )


@workflow.defn
class Collector:
    def __init__(self) -> None:
        self.items: list = []

    @workflow.signal
    def add(self, item) -> None:
        self.items.append(item)

    @workflow.query
    def count(self) -> int:
        return len(self.items)

    @workflow.run
    async def run(self, expected: int) -> list:
        await workflow.wait_condition(lambda: len(self.items) >= expected)
        return self.items


@workflow.defn
class ManyTimers:
    @workflow.run
    async def run(self, delays_ms: list) -> int:
        async def one(ms):
            await workflow.sleep(ms / 1000)
            return workflow.now().timestamp()

        await asyncio.gather(*(one(ms) for ms in delays_ms))
        return len(delays_ms)


@workflow.defn
class CountDown:
    @workflow.run
    async def run(self, n: int, total: int) -> int:
        await workflow.execute_activity(add, total, n, start_to_close_timeout=T)
        if n > 0:
            workflow.continue_as_new(n - 1, total + n)
        return total


@workflow.defn
class ChargeRemote:
    """One activity on the 'kq' queue, served by worker subprocesses that tests kill."""

    @workflow.run
    async def run(self, amount: int) -> str:
        from kadence import RetryPolicy

        return await workflow.execute_activity(
            "charge_card",
            amount,
            task_queue="kq",
            start_to_close_timeout=timedelta(seconds=3),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200)),
        )


HEARTBEATS: list = []


@activity.defn
async def resumable(total: int) -> dict:
    """Heartbeats its progress; attempt 1 stalls (no more heartbeats) after half the work."""
    info = activity.info()
    start = info.heartbeat_details or 0
    HEARTBEATS.append((info.attempt, start))
    for i in range(start, total):
        if info.attempt == 1 and i == total // 2:
            await asyncio.sleep(3)  # stalled: the heartbeat timeout fires
        activity.heartbeat(i + 1)
        await asyncio.sleep(0.05)
    return {"attempt": info.attempt, "resumed_from": start}


@workflow.defn
class Resumable:
    @workflow.run
    async def run(self, total: int) -> dict:
        from kadence import RetryPolicy

        return await workflow.execute_activity(
            resumable,
            total,
            heartbeat_timeout=timedelta(milliseconds=800),
            start_to_close_timeout=T,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=3),
        )


@workflow.defn
class SleepThenAct:
    @workflow.run
    async def run(self, seconds: float) -> int:
        await workflow.sleep(seconds)
        return await workflow.execute_activity(add, 1, 1, start_to_close_timeout=T)


@workflow.defn
class AddChild:
    @workflow.run
    async def run(self, x: int) -> int:
        return await workflow.execute_activity(add, x, 1000, start_to_close_timeout=T)


@workflow.defn
class FanOut:
    @workflow.run
    async def run(self, n: int) -> list:
        handles = [await workflow.start_child_workflow(AddChild, i) for i in range(n)]
        return [await h for h in handles]


@workflow.defn
class GateOnQ:
    """Waits at a gate activity served on the same task queue as everything else."""

    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(gate, "slow", start_to_close_timeout=T)


@workflow.defn
class CancelMe:
    """Waits at a gate; when cancelled, refunds (a compensation activity) and ends canceled."""

    @workflow.run
    async def run(self) -> str:
        from kadence.samples.payment_saga import refund_payment

        try:
            await workflow.execute_activity(
                gate, "wait", task_queue="gates", start_to_close_timeout=timedelta(seconds=60)
            )
        except asyncio.CancelledError:
            await workflow.execute_activity(refund_payment, "pay-1", start_to_close_timeout=timedelta(seconds=10))
            raise
        return "not canceled"


# ---- projections (visibility): trivial workflows with every kind of outcome


@workflow.defn
class VisQuick:
    """Completes at once, or fails when asked to."""

    @workflow.run
    async def run(self, fail: bool) -> str:
        if fail:
            from kadence import ApplicationError

            raise ApplicationError("asked to fail", non_retryable=True)
        return "ok"


@workflow.defn
class VisWaiter:
    """Waits for a `go` signal (tests leave it running, cancel or terminate it)."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def release(self) -> None:
        self.go = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.go)
        return "released"


@workflow.defn
class VisTagger:
    """Upserts a search attribute, then completes or continues as new once."""

    @workflow.run
    async def run(self, again: bool) -> str:
        workflow.upsert_search_attributes({"stage": "tagged" if again else "done"})
        if again:
            workflow.continue_as_new(False)
        return "tagged"


#: activities of `counted` running right now, and the most seen at once
RUNNING = {"now": 0, "max": 0}


@activity.defn
async def counted(n: int) -> int:
    RUNNING["now"] += 1
    RUNNING["max"] = max(RUNNING["max"], RUNNING["now"])
    try:
        await asyncio.sleep(0.05)
    finally:
        RUNNING["now"] -= 1
    return n


#: opened by a test: ``held`` activities wait for it
HOLD = {"gate": None, "done": []}


@activity.defn
async def held(n: int) -> int:
    await HOLD["gate"].wait()
    HOLD["done"].append(n)
    return n


@workflow.defn
class HeldOnce:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_activity(held, n, start_to_close_timeout=T)


@workflow.defn
class CountedOnce:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_activity(counted, n, start_to_close_timeout=T)


@activity.defn
async def huge_result() -> str:
    return "x" * 1_500_000  # over the producer's message.max.bytes (1,000,000)


@workflow.defn
class HugeResult:
    """An activity whose result cannot be sent: the activity fails, once, not retried."""

    @workflow.run
    async def run(self) -> str:
        from kadence import ActivityError

        try:
            await workflow.execute_activity(huge_result)  # no timeout: nothing would end a lost attempt
        except ActivityError as err:
            return f"{err.attempt} {err.__cause__.type}"
        return "sent"
