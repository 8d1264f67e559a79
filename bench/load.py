"""Load generators: closed loop (a fixed number of workflows in flight) and open loop (a fixed
start rate). Both go through the SDK's ``Client`` exactly as an application would: start the
workflow (await the start reply), optionally signal it, then await its result."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kadence import Client

from .common import QUEUE


@dataclass
class Done:
    started: float  # time.monotonic() before the start command was sent
    finished: float  # time.monotonic() when the result reply arrived
    wall_started_ms: float  # time.time() * 1000 before the start command was sent
    result: object


@dataclass
class Recorder:
    done: list[Done] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: int = 0
    inflight: int = 0

    def completed_between(self, t0: float, t1: float) -> list[Done]:
        return [d for d in self.done if t0 <= d.finished < t1]


async def run_workflow(
    client: Client,
    wf,
    arg,
    rec: Recorder,
    *,
    wid: str,
    signal: str | None = None,
    timeout: float = 120.0,
    eager: bool = False,
    options: dict | None = None,
) -> None:
    """``options``: more arguments of the start (``concurrency=`` in scenario ``concurrency``)."""
    rec.started += 1
    rec.inflight += 1
    t0, w0 = time.monotonic(), time.time() * 1000
    try:
        if signal is None:  # what a caller that only wants the result does
            result = await client.execute_workflow(
                wf,
                arg,
                id=wid,
                task_queue=QUEUE,
                timeout=timeout,
                result_timeout=timeout,
                request_eager_start=eager,
                **(options or {}),
            )
        else:
            handle = await client.start_workflow(wf, arg, id=wid, task_queue=QUEUE, timeout=timeout)
            await handle.signal(signal, 1)
            result = await handle.result(timeout=timeout)
        rec.done.append(Done(t0, time.monotonic(), w0, result))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - counted and reported, the run carries on
        rec.errors.append(f"{wid}: {type(exc).__name__}: {exc}")
    finally:
        rec.inflight -= 1


async def closed_loop(
    client: Client,
    wf,
    rec: Recorder,
    *,
    concurrency: int,
    until: float | None = None,
    stop: asyncio.Event | None = None,
    signal: str | None = None,
    prefix: str | None = None,
    eager: bool = False,
    options: Callable[[int, int], dict] | None = None,
) -> None:
    """``concurrency`` loops, each starting the next workflow when its previous one completed
    (``eager``: with ``request_eager_start``; ``options(loop, n)``: more arguments of loop's
    n-th start).

    With ``until`` (monotonic): workflows still running then are abandoned. With ``stop``: once it
    is set, no loop starts another workflow, and this returns when the running ones completed
    (cancel the task to abandon them)."""
    prefix = prefix or uuid.uuid4().hex[:8]
    stop = stop or asyncio.Event()

    async def loop(i: int) -> None:
        for n in itertools.count():
            if stop.is_set() or (until is not None and time.monotonic() >= until):
                return
            extra = options(i, n) if options is not None else None
            await run_workflow(client, wf, n, rec, wid=f"{prefix}-{i}-{n}", signal=signal, eager=eager, options=extra)

    tasks = [asyncio.create_task(loop(i)) for i in range(concurrency)]
    try:
        if until is not None:
            await asyncio.wait(tasks, timeout=max(0.0, until - time.monotonic()))
        else:
            await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def open_loop(
    client: Client,
    wf,
    rec: Recorder,
    *,
    rate: float,
    until: float,
    drain: float,
    max_inflight: int = 5000,
    prefix: str | None = None,
) -> None:
    """Start ``rate`` workflows per second (evenly spaced) until ``until``; then wait up to
    ``drain`` seconds for those in flight to complete."""
    prefix = prefix or uuid.uuid4().hex[:8]
    tasks: set[asyncio.Task] = set()
    interval = 1.0 / rate
    t_next = time.monotonic()
    n = 0
    try:
        while True:
            now = time.monotonic()
            if now >= until:
                break
            if t_next > now:
                await asyncio.sleep(t_next - now)
            t_next += interval
            if rec.inflight >= max_inflight:
                rec.errors.append("open loop: in-flight cap reached, start skipped")
                continue
            t = asyncio.create_task(run_workflow(client, wf, n, rec, wid=f"{prefix}-{n}"))
            n += 1
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait(list(tasks), timeout=drain)
    finally:
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
