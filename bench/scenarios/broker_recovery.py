"""Scenario: the broker restarts under light load (issue 16: broker answering again -> first
committed command, target < 10 s).

The scenario starts a broker of its own (``scripts/devstack.py``'s ``KafkaBroker``; the bench's
broker is not disturbed), an engine on it, and a few 3-activity workflows in a closed loop. Each
round SIGKILLs the broker, waits ``DOWN_S``, starts it again on the same ports and data directory,
and measures from the moment it accepts connections again:

- ``first_commit_s``: to the first history event committed after it (a read_committed consumer
  on ``{ns}.history``; the event's timestamp is later than the broker's return). A new
  workflow is started the moment the broker answers (``probe_start_s``: until that start's
  reply), so a command is waiting whatever the workers do: the closed loop's own commands wait
  for the worker, whose task consumers rejoin their groups only after their former selves'
  sessions expire when the outage outlasted the session timeout (10 s here; decision 0035);
- ``first_completion_s``: to the first workflow that completes after it.

No engine process may exit (``check_alive``). A round that sees no commit within 120 s is recorded
as timed out (counted as 120 s, a lower bound) and ends the scenario: seen on this machine in
session 10, when the processor's ``send_offsets_to_transaction`` blocked for minutes after the
restart (librdkafka #5511), until decision 0035 gave such calls up after ``KADENCE_TXN_HANG_S``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import threading
import time
from pathlib import Path

from .. import workloads
from ..common import QUEUE, BenchError, Context, session_timeout_ms
from ..engine import engine
from ..load import Recorder, closed_loop
from .recovery import FirstProgress, _tail

ROUNDS = 3
DOWN_S = 3.0
CONCURRENCY = 4
TARGET_S = 10.0
#: a round with no commit within this is recorded as timed out (and ends the scenario)
ROUND_TIMEOUT_S = 120.0


def _broker():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import devstack  # the project's broker launcher

    return devstack.KafkaBroker(die_with_parent=True)


async def _probe_start(client, workflow_id: str, since: float) -> float | None:
    """Seconds from ``since`` until a new workflow's start is answered (committed), or None if
    it failed; the workflow is left to run with the others."""
    try:
        await client.start_workflow(
            workloads.ThreeActivities, 0, id=workflow_id, task_queue=QUEUE, timeout=ROUND_TIMEOUT_S
        )
    except Exception:  # noqa: BLE001 - a failed probe is reported as None, the round goes on
        return None
    return round(time.monotonic() - since, 2)


async def run(ctx: Context) -> dict:
    task = ctx.task("broker_recovery")
    loop = asyncio.get_running_loop()
    broker = _broker()
    ctx.update(task, "starting a broker of its own")
    await loop.run_in_executor(None, broker.start)
    own = Context(dataclasses.replace(ctx.settings, bootstrap=broker.bootstrap), ctx.progress, ctx.results)
    rounds = []
    try:
        async with engine(own, "broker-recovery") as eng:
            stop = threading.Event()
            seen: list = []
            tail = threading.Thread(target=_tail, args=(eng.config, stop, seen), daemon=True)
            tail.start()
            rec = Recorder()
            runner = asyncio.create_task(
                closed_loop(
                    eng.client, workloads.ThreeActivities, rec, concurrency=CONCURRENCY, until=time.monotonic() + 3600
                )
            )
            try:
                await asyncio.sleep(max(3.0, own.settings.warmup))
                if not rec.done:
                    raise BenchError("no workflow completed before the first broker kill")
                for i in range(1, ROUNDS + 1):
                    ctx.update(task, f"round {i}/{ROUNDS}: SIGKILL the broker, {DOWN_S:.0f} s down")
                    broker.kill()
                    await asyncio.sleep(DOWN_S)
                    await loop.run_in_executor(None, broker.start)
                    back_wall, back_mono = time.time() * 1000, time.monotonic()
                    probe = asyncio.create_task(_probe_start(eng.client, f"probe-{i}", back_mono))
                    progress = FirstProgress(seen, rec, back_wall, back_mono)
                    while not (progress.update() and probe.done()):
                        waited = time.monotonic() - back_mono
                        if waited > ROUND_TIMEOUT_S:
                            break
                        eng.procs.check_alive()
                        ctx.update(task, f"round {i}/{ROUNDS}: {waited:.1f} s since the broker answered again")
                        await asyncio.sleep(0.05)
                    first_commit, first_done = progress.event_s, progress.done_s
                    probe_s = probe.result() if probe.done() and not probe.exception() else None
                    if not probe.done():
                        probe.cancel()
                    if first_commit is None or first_done is None:  # the engine is stuck: no more rounds
                        rounds.append(
                            {
                                "first_commit_s": None,
                                "first_completion_s": None,
                                "timed_out": True,
                                "probe_start_s": probe_s,
                            }
                        )
                        ctx.update(
                            task,
                            f"[red]round {i}: nothing completed within {ROUND_TIMEOUT_S:.0f} s of the "
                            f"broker's return; logs in {eng.procs.logdir}[/]",
                        )
                        break
                    rounds.append(
                        {
                            "first_commit_s": round(first_commit, 2),
                            "first_completion_s": round(first_done, 2),
                            "probe_start_s": probe_s,
                        }
                    )
                    await asyncio.sleep(3)  # steady again before the next kill
                eng.procs.check_alive()
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
                stop.set()
                await loop.run_in_executor(None, tail.join, 5)
    finally:
        await loop.run_in_executor(None, broker.cleanup)
    timed_out = sum(1 for r in rounds if r.get("timed_out"))
    # a round that timed out counts as its timeout: a lower bound, and the target is not met
    worst = max(ROUND_TIMEOUT_S if r.get("timed_out") else r["first_commit_s"] for r in rounds)
    out = {
        "rounds": rounds,
        "first_commit_s_max": worst,
        "timed_out_rounds": timed_out,
        "first_completion_s_max": max(
            ROUND_TIMEOUT_S if r.get("timed_out") else r["first_completion_s"] for r in rounds
        ),
        "target_s": TARGET_S,
        "down_s": DOWN_S,
        "concurrency": CONCURRENCY,
        "session_timeout_ms": int(session_timeout_ms()),
        "errors": len(rec.errors),
        "what": "broker SIGKILL, down 3 s, started again -> first history event committed after its return",
    }
    ctx.update(
        task,
        f"first commit after the broker's return: worst {worst} s of {len(rounds)} rounds, "
        f"{timed_out} timed out (target < {TARGET_S:.0f} s)",
    )
    return out
