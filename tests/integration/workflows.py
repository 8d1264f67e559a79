"""Workflows and activities used by the integration tests."""

from __future__ import annotations

import asyncio
import collections
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


@activity.defn
def double(x: int) -> int:
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
        await workflow.execute_activity(boom, message, start_to_close_timeout=T)
