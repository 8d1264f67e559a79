"""Workflows and activities the benchmarks run (the worker subprocesses import this module:
``kadence worker --module bench.workloads``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kadence import activity, workflow

T = timedelta(seconds=30)


@activity.defn
async def noop(x: int) -> int:
    return x + 1


@activity.defn
async def timed(x: int) -> list:
    """Returns [x + 1, scheduled_ms, started_ms, finished_ms]: the engine's scheduled time
    (history event time, processor clock, whole ms) and this attempt's start and end (wall clock,
    same machine)."""
    started = time.time() * 1000
    info = activity.info()
    return [x + 1, info.scheduled_time_ms, started, time.time() * 1000]


@workflow.defn
class OneActivity:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_activity(noop, n, start_to_close_timeout=T)


@workflow.defn
class ThreeActivities:
    @workflow.run
    async def run(self, n: int) -> int:
        for _ in range(3):
            n = await workflow.execute_activity(noop, n, start_to_close_timeout=T)
        return n


@workflow.defn
class ThreeLocal:
    """The 3-activity workflow with local activities (decision 0043): one workflow task."""

    @workflow.run
    async def run(self, n: int) -> int:
        for _ in range(3):
            n = await workflow.execute_local_activity(noop, n)
        return n


@workflow.defn
class TimedThree:
    """Three activities in sequence; returns each activity's timing record."""

    @workflow.run
    async def run(self, n: int) -> list:
        out = []
        for _ in range(3):
            r = await workflow.execute_activity(timed, n, start_to_close_timeout=T)
            n = r[0]
            out.append(r)
        return out


@workflow.defn
class TenSteps:
    """Ten steps: 3 activities, a 100 ms durable sleep, 2 activities, wait for the "go" signal,
    3 activities."""

    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def proceed(self, _value=None) -> None:
        self.go = True

    @workflow.run
    async def run(self, n: int) -> int:
        for _ in range(3):
            n = await workflow.execute_activity(noop, n, start_to_close_timeout=T)
        await workflow.sleep(0.1)
        for _ in range(2):
            n = await workflow.execute_activity(noop, n, start_to_close_timeout=T)
        await workflow.wait_condition(lambda: self.go)
        for _ in range(3):
            n = await workflow.execute_activity(noop, n, start_to_close_timeout=T)
        return n


@workflow.defn
class IdleSleeper:
    """Opens, starts a long durable timer and waits (an idle open workflow)."""

    @workflow.run
    async def run(self, hours: float) -> None:
        await workflow.sleep(hours * 3600)


# -- typed payloads (scenario ``payloads``): the same data as a dataclass and as a dict ---------


@dataclass
class Parcel:
    n: int
    sku: str
    placed: datetime
    tags: list[str] = field(default_factory=list)


@activity.defn
async def step_typed(p: Parcel) -> Parcel:
    return Parcel(n=p.n + 1, sku=p.sku, placed=p.placed, tags=p.tags)


@activity.defn
async def step_dict(p):
    return {**p, "n": p["n"] + 1}


@workflow.defn
class ThreeTyped:
    """Three activities passing a dataclass (validated on each receipt)."""

    @workflow.run
    async def run(self, n: int) -> Parcel:
        p = Parcel(n=n, sku="sku-0001", placed=workflow.now(), tags=["bench", "typed"])
        for _ in range(3):
            p = await workflow.execute_activity(step_typed, p, start_to_close_timeout=T)
        return p


@workflow.defn
class ThreeDict:
    """The same three activities passing the same fields as an untyped dict."""

    @workflow.run
    async def run(self, n: int):
        p = {"n": n, "sku": "sku-0001", "placed": workflow.now().isoformat(), "tags": ["bench", "typed"]}
        for _ in range(3):
            p = await workflow.execute_activity(step_dict, p, start_to_close_timeout=T)
        return p


class BenchCipher:
    """The payload codec of scenario ``payloads``' ``codec`` mode (``KADENCE_CODEC=
    bench.workloads:BenchCipher``): AES-256-GCM with a fixed key and a random nonce per payload,
    what an application encrypting its payloads does (the key is the bench's own, not a secret)."""

    def __init__(self) -> None:
        import os

        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead, self._random = AESGCM(bytes(range(32))), os.urandom

    def encode(self, data: bytes) -> bytes:
        nonce = self._random(12)
        return nonce + self._aead.encrypt(nonce, data, None)

    def decode(self, data: bytes) -> bytes:
        return self._aead.decrypt(data[:12], data[12:], None)


@workflow.defn
class LongHistory:
    """``n`` activities one after another: a history of about 4n + 5 events (scenario ``console``)."""

    @workflow.run
    async def run(self, n: int) -> int:
        total = 0
        for i in range(n):
            total += await workflow.execute_activity(noop, i, start_to_close_timeout=T)
        return total


@workflow.defn
class HotCounter:
    """One workflow many clients signal at once (scenario ``hot_workflow``): counts each ``hit``
    by its number (a number seen twice in a run is a signal handled twice), answers ``count``
    updates, continues as new when the engine suggests it (carrying the totals; signals that
    come meanwhile go to the next run), and returns once a ``stop`` signal came."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.repeats = 0
        self.stopped = False

    @workflow.signal
    def hit(self, number: int) -> None:
        if number in self.seen:
            self.repeats += 1
        self.seen.add(number)

    @workflow.signal
    def stop(self) -> None:
        self.stopped = True

    @workflow.update
    def count(self) -> int:
        return len(self.seen)

    @workflow.run
    async def run(self, distinct: int = 0, repeats: int = 0, runs: int = 1) -> dict:
        await workflow.wait_condition(lambda: self.stopped or workflow.info().continue_as_new_suggested)
        if not self.stopped:
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(distinct + len(self.seen), repeats + self.repeats, runs + 1)
        return {"distinct": distinct + len(self.seen), "repeats": repeats + self.repeats, "runs": runs}


@workflow.defn
class SignalSink:
    """Counts ``hit`` signals and never closes: the replay-length measurement of scenario
    ``hot_workflow`` replays histories of it built to a given length."""

    def __init__(self) -> None:
        self.hits = 0

    @workflow.signal
    def hit(self, _number: int) -> None:
        self.hits += 1

    @workflow.query
    def count(self) -> int:
        """(scenario ``cli``'s query)"""
        return self.hits

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.hits < 0)


@workflow.defn(name="BenchScheduled")
class Scheduled:
    """What a schedule of the ``schedules`` scenario starts: nothing to do (its start is what is timed)."""

    @workflow.run
    async def run(self) -> None:
        return None


@activity.defn
async def stream_tick(i: int) -> int:
    """Publishes its number and the wall-clock time of the publish (``streams`` scenario)."""
    activity.publish("ticks", {"i": i, "at_ms": time.time() * 1000})
    return i


@workflow.defn
class Streamer:
    """``n`` activities one after the other, each publishing one value (``streams`` scenario)."""

    @workflow.run
    async def run(self, n: int) -> int:
        for i in range(n):
            await workflow.execute_activity(stream_tick, i, start_to_close_timeout=T)
        return n


WORKFLOWS = [
    Streamer,
    Scheduled,
    HotCounter,
    SignalSink,
    OneActivity,
    ThreeActivities,
    ThreeLocal,
    TimedThree,
    TenSteps,
    IdleSleeper,
    ThreeTyped,
    ThreeDict,
    LongHistory,
]
ACTIVITIES = [noop, timed, step_typed, step_dict, stream_tick]
