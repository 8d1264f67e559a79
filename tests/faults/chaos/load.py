"""The load driver: a steady stream of sample workflows, their signals, and injected bad inputs.

Every request is retried with the SAME request ID until it is answered (a broker restart or a
killed processor makes a request time out), which is itself a test of deduplication. On top of
that the driver injects, at seeded random moments:

* duplicate commands: a start, a signal or an update re-sent with the request ID of an accepted
  one (an update must answer with the same result);
* rejected updates: an update its validator refuses (it must leave nothing in history);
* pauses: a running workflow paused (the request sent twice), then unpaused a few seconds later
  (twice too); nothing may be dispatched or fire in between, and the workflow must still end
  with its result;
* stale workflow-task completions: ``RespondWorkflowTaskCompleted`` for a workflow task that
  history shows completed already, completing the workflow with a wrong result;
* late activity completions: ``RespondActivityTaskCompleted`` for an attempt that history shows
  completed or timed out already, with a wrong result;
* undecodable records: garbage bytes on ``{ns}.commands``.

If any of them were accepted, the checker would see a wrong result, a second result or a
history that does not replay.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from datetime import timedelta

from confluent_kafka import Consumer, KafkaException, Producer

from kadence import (
    BrokerUnavailableError,
    Client,
    WorkflowAlreadyStartedError,
    WorkflowError,
    WorkflowUpdateFailedError,
)
from kadence.topics import Catalogue, KafkaConfig, partition_for
from kadence.topics.protocol import start_body
from kadence.topics.records import new_id, start_run_id
from kadence.topics.standalone import activity_key

from .checker import Expectations, Violation
from .workflows import (
    ACTIVITY_TIMEOUT,
    CRON_PERIOD_S,
    CRON_SCHEDULE,
    CRON_WORKFLOWS,
    DEBOUNCE_S,
    RETRY,
    SCHEDULE_EVERY_MS,
    SCHEDULES,
    TASK_QUEUE,
    ChaosOrder,
    ChaosTick,
    approval_for,
    charge,
    cron_id,
    debounced,
    eager,
    executed,
    expected_result,
    run_limits,
    run_priority,
    schedule_name,
    standalone,
    standalone_id,
    update_result,
    wants_signal,
    wants_update,
)

#: how long one request may go unanswered before it is retried (same request ID)
REQUEST_TIMEOUT_S = 20.0
#: an injection (with its retries) that takes longer is abandoned and reported
INJECTION_TIMEOUT_S = 60.0
#: the barrier waits at most this many times its timeout, however long the broker is unresponsive
BARRIER_CAP = 3.0


class BrokerClock:
    """Seconds in which the broker did not serve: a metadata request (a fresh one each time,
    not librdkafka's cache) that failed or named a partition without a leader (counted with the
    pause before the next probe), or the part beyond 1 s of one that was slow. Starved
    under the campaign's CPU burners, the broker once answered no request, heartbeat or
    coordinator lookup for minutes after a restart (its controller events took 8 s, its group
    coordinator reloaded its state again and again); no engine makes progress then, so the
    barrier's liveness deadline does not count that time."""

    def __init__(self, config: KafkaConfig, topic: str):
        self._consumer = Consumer(config.consumer(None))
        self._topic = topic
        self.unresponsive_s = 0.0
        self._task: asyncio.Task | None = None

    def _probe(self) -> float:
        t = time.monotonic()
        try:
            md = self._consumer.list_topics(self._topic, timeout=5)
        except KafkaException:
            return time.monotonic() - t
        topic = md.topics.get(self._topic)
        if topic is None or topic.error is not None or any(p.leader < 0 for p in topic.partitions.values()):
            return time.monotonic() - t + 1.0  # answered, but a partition has no leader (the broker fenced)
        return max(0.0, time.monotonic() - t - 1.0)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.unresponsive_s += await loop.run_in_executor(None, self._probe)
            await asyncio.sleep(1.0)

    def __enter__(self) -> BrokerClock:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc) -> None:
        if self._task is not None:
            self._task.cancel()
        self._consumer.close()


async def send_signal(client: Client, workflow_id: str, request_id: str, note: str) -> None:
    """The one way the suite sends a signal: today through the SDK client. Switch this to the
    HTTP gateway (``POST /v1/workflows/{id}/signals`` with ``Idempotency-Key: request_id``)
    to make the signal invariant cover the gateway's acceptance too."""
    await client.get_workflow_handle(workflow_id).signal("approve", note, request_id=request_id)


async def send_update(client: Client, workflow_id: str, request_id: str, k: int) -> int:
    """The one way the suite sends an update (through the SDK client)."""
    return await client.get_workflow_handle(workflow_id).execute_update(
        ChaosOrder.bump, k, request_id=request_id, timeout=REQUEST_TIMEOUT_S
    )


class LoadDriver:
    def __init__(self, client: Client, config: KafkaConfig, rng: random.Random, *, workflows: int, eager_worker=None):
        self.client = client
        #: a Worker of ``client`` (in this process) that runs eager starts' first tasks
        self.eager_worker = eager_worker
        self.config = config
        self.rng = rng
        self.n = workflows
        self.exp = Expectations()
        self.counts: collections.Counter = collections.Counter()
        self.violations: list[Violation] = []
        self._tasks: set[asyncio.Task] = set()
        self._results: dict[str, asyncio.Task] = {}
        #: workflows paused by an injection and not unpaused yet
        self._paused: set[str] = set()
        self._producer = Producer(config.producer())
        self.last_injection: tuple[str, str] | None = None

    @staticmethod
    def workflow_id(i: int) -> str:
        return f"order-{i}"

    # -- retries -------------------------------------------------------------------------------

    async def _retry(self, what: str, call, deadline_s: float = 300.0):
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                return await call()
            except BrokerUnavailableError:
                self.counts[f"{what}_retries"] += 1
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    def _spawn(self, coro) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    # -- starts and signals --------------------------------------------------------------------

    async def _start(self, i: int) -> None:
        wf = self.workflow_id(i)
        if standalone(i):
            await self._standalone(i)
            return
        if executed(i):
            self.exp.results[wf] = expected_result(i)
            self.counts["workflows_started"] += 1
            self.counts["workflows_executed"] += 1
            self._results[wf] = self._spawn(self._execute(i, wf))
            return
        if eager(i) and self.eager_worker is not None:
            handle = await self._eager_start(i, wf)
        elif debounced(i):
            handle = await self._debounced_start(i, wf)
        else:
            handle = await self._start_order(i, wf)
        self.exp.results[wf] = expected_result(i)
        self.exp.run_ids[wf] = handle.run_id
        self.exp.limited_runs += bool(run_limits(i))
        self.counts["workflows_started"] += 1
        self._results[wf] = self._spawn(self._result(wf))
        if wants_signal(i):
            await asyncio.sleep(self.rng.uniform(0, 3))
            rid = f"signal-{wf}"
            await self._retry("signal", lambda: send_signal(self.client, wf, rid, approval_for(i)))
            self.exp.signals[rid] = wf
            self.counts["signals_accepted"] += 1
        if wants_update(i):
            await asyncio.sleep(self.rng.uniform(0, 3))
            rid = f"update-{wf}"
            got = await self._retry("update", lambda: send_update(self.client, wf, rid, i))
            self._check_update(wf, rid, got, update_result(i))
            self.exp.updates[rid] = wf
            self.counts["updates_accepted"] += 1

    async def _start_order(self, i: int, wf: str, *, eager: bool = False, what: str = "start"):
        """Start order ``i`` as ``wf`` with its one request ID (so every retry, duplicate and race
        is the same start), retried while the broker is away."""
        return await self._retry(
            what,
            lambda: self.client.start_workflow(
                ChaosOrder,
                i,
                id=wf,
                task_queue=TASK_QUEUE,
                request_id=f"start-{wf}",
                timeout=REQUEST_TIMEOUT_S,
                request_eager_start=eager,
                concurrency=run_limits(i),
                priority=run_priority(i),
            ),
        )

    async def _debounced_start(self, i: int, wf: str):
        """A burst of three debounced starts of order ``i``, the last with its own input: every
        start must get the same run ID, and the run must run with the last input."""

        def start(n: int, rid: str):
            return self.client.start_workflow(
                ChaosOrder,
                n,
                id=wf,
                task_queue=TASK_QUEUE,
                request_id=rid,
                timeout=REQUEST_TIMEOUT_S,
                concurrency=run_limits(i),
                priority=run_priority(i),
                debounce=timedelta(seconds=DEBOUNCE_S),
            )

        stale = [await self._retry("start", lambda k=k: start(i + 1000 + k, f"pre{k}-{wf}")) for k in range(2)]
        handle = await self._retry("start", lambda: start(i, f"start-{wf}"))
        self.counts["debounced_starts"] += 1
        if {h.run_id for h in stale} != {handle.run_id}:
            runs = sorted({h.run_id for h in [*stale, handle]})
            self.violations.append(Violation("completion", f"a burst of debounced starts got runs {runs}", (wf,)))
        return handle

    async def _eager_start(self, i: int, wf: str):
        """An eager start of order ``i`` (``workflows.eager``): after a first task the "crashed
        client" ran and never sent, or racing an ordinary start with the same request ID."""
        if i % 2 == 0:
            body = start_body("ChaosOrder", TASK_QUEUE, self.client.converter.to_bytes([i]))
            abandoned = await self.eager_worker.run_first_task(wf, start_run_id(new_id()), body, new_id())
            self.counts["eager_abandoned_first_tasks"] += abandoned is not None

        if i % 2 == 0:
            handle = await self._start_order(i, wf, eager=True)
        else:
            handle, other = await asyncio.gather(self._start_order(i, wf, eager=True), self._start_order(i, wf))
            self.counts["eager_raced_starts"] += 1
            if other.run_id != handle.run_id:
                self.violations.append(
                    Violation(
                        "completion",
                        f"an eager start and an ordinary one with the same request ID got runs "
                        f"{handle.run_id} and {other.run_id}",
                        (wf,),
                    )
                )
        self.counts["eager_starts"] += 1
        return handle

    async def _standalone(self, i: int) -> None:
        """Order ``i`` as a standalone ``charge`` activity: started twice with one request ID (the
        same run), its result awaited by two callers (the same result)."""
        aid = standalone_id(i)
        key = activity_key(aid)

        def start():
            return self.client.start_activity(
                charge, i, id=aid, task_queue=TASK_QUEUE, request_id=f"start-{key}", timeout=REQUEST_TIMEOUT_S,
                start_to_close_timeout=ACTIVITY_TIMEOUT, retry_policy=RETRY,
            )  # fmt: skip

        first = await self._retry("standalone_start", start)
        again = await self._retry("standalone_start", start)
        if again.run_id != first.run_id:
            self.violations.append(
                Violation("completion", f"one start request got runs {first.run_id} and {again.run_id}", (key,))
            )
        self.exp.results[key] = 2 * i
        self.counts["standalone_activities"] += 1
        self._results[key] = self._spawn(self._standalone_result(aid, key))

    async def _standalone_result(self, aid: str, key: str):
        async def one():
            handle = self.client.get_activity_handle(aid)
            return await self._retry("result", lambda: handle.result(timeout=60), deadline_s=3600)

        a, b = await asyncio.gather(one(), one())
        if a != b:
            self.violations.append(Violation("completion", f"two callers got results {a!r} and {b!r}", (key,)))
        return a

    def _check_update(self, wf: str, rid: str, got: int, expected: int) -> None:
        if got != expected:
            self.violations.append(Violation("update", f"update {rid} answered {got!r}, expected {expected!r}", (wf,)))

    async def _execute(self, i: int, wf: str):
        return await self._retry(
            "execute",
            lambda: self.client.execute_workflow(
                ChaosOrder,
                i,
                id=wf,
                task_queue=TASK_QUEUE,
                request_id=f"start-{wf}",
                timeout=REQUEST_TIMEOUT_S,
                result_timeout=60,
                concurrency=run_limits(i),
                priority=run_priority(i),
            ),
            deadline_s=3600,
        )

    async def _result(self, wf: str):
        handle = self.client.get_workflow_handle(wf)
        return await self._retry("result", lambda: handle.result(timeout=60), deadline_s=3600)

    async def run_crons(self) -> None:
        """Start the cron workflows (``workflows.ChaosTick``), each once (a retry has the same
        request ID)."""
        self.exp.cron_period_ms = CRON_PERIOD_S * 1000
        for k in range(CRON_WORKFLOWS):
            wf = cron_id(k)
            handle = await self._retry(
                "cron_start",
                lambda wf=wf, k=k: self.client.start_workflow(
                    ChaosTick,
                    k,
                    id=wf,
                    task_queue=TASK_QUEUE,
                    request_id=f"start-{wf}",
                    cron_schedule=CRON_SCHEDULE,
                    timeout=REQUEST_TIMEOUT_S,
                ),
            )
            self.exp.crons[wf] = handle.run_id
            self.counts["cron_workflows_started"] += 1

    async def stop_crons(self) -> None:
        """End every cron chain (a terminate of the workflow, whichever run is current)."""
        for wf in sorted(self.exp.crons):
            await self._retry(
                "cron_stop",
                lambda wf=wf: self.client.get_workflow_handle(wf).terminate(
                    reason="chaos: the load is over", request_id=f"stop-{wf}"
                ),
            )

    async def run_schedules(self) -> None:
        """Create the schedules (``workflows.SCHEDULES``), each once (a retry has the same request ID)."""
        from kadence import ScheduleInterval, SchedulePolicy, ScheduleSpec, schedule_action

        self.exp.schedule_every_ms = SCHEDULE_EVERY_MS
        for k in range(SCHEDULES):
            sid = schedule_name(k)
            await self._retry(
                "schedule_create",
                lambda sid=sid, k=k: self.client.create_schedule(
                    sid,
                    spec=ScheduleSpec(intervals=[ScheduleInterval(every_ms=SCHEDULE_EVERY_MS)]),
                    action=schedule_action(ChaosTick, 1000 + k, task_queue=TASK_QUEUE),
                    policy=SchedulePolicy(overlap="allow_all"),
                    request_id=f"create-{sid}",
                ),
            )
            self.exp.schedules.append(sid)
            self.counts["schedules_created"] += 1

    async def stop_schedules(self, deadline_s: float = 600.0) -> None:
        """Pause every schedule (same request ID on a retry), then wait until none has a run still
        going, so the drain's checks see every run it started closed."""
        from kadence import KadenceError

        deadline = time.monotonic() + deadline_s
        for sid in self.exp.schedules:
            handle = self.client.get_schedule_handle(sid)
            for step in ("pause", "settle"):
                while True:
                    try:
                        if step == "pause":
                            await asyncio.wait_for(
                                handle.pause("chaos: the load is over", request_id=f"pause-{sid}"), 60
                            )
                            # the update invariant: answered, so in the schedule's history once
                            self.exp.updates[f"pause-{sid}"] = f"kadence-schedule:{sid}"
                            break
                        state = (await asyncio.wait_for(handle.describe(), 60)).state
                        if not state.running and not state.waiting:
                            self.counts["schedule_actions"] += state.actions
                            break
                        await asyncio.sleep(1.0)
                    except (KadenceError, TimeoutError):  # a worker or processor down: again
                        self.counts[f"schedule_{step}_retries"] += 1
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(1.0)

    async def run_starts(self, seconds: float) -> None:
        """Start the workflows at an even pace over ``seconds``."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        for i in range(self.n):
            await asyncio.sleep(max(0.0, t0 + i * seconds / self.n - loop.time()))
            self._spawn(self._start(i))

    # -- injections ----------------------------------------------------------------------------

    async def run_injections(self, until: asyncio.Event) -> None:
        kinds = [
            "duplicate_start",
            "duplicate_signal",
            "duplicate_update",
            "rejected_update",
            "stale_task",
            "late_activity",
            "undecodable",
            "pause",
        ]
        # every kind once per round, in the seed's order: a loaded run makes only ~17 injections
        # (each reads a history partition), and independent draws once left one kind out
        # entirely (seed 2717153517, session 17: no late activity completion)
        order: list[str] = []
        while not until.is_set():
            await asyncio.sleep(self.rng.uniform(0.3, 1.2))
            if not order:
                order = self.rng.sample(kinds, len(kinds))
            kind = order.pop()
            self.last_injection = (kind, "")
            try:
                await asyncio.wait_for(getattr(self, f"_inject_{kind}")(), INJECTION_TIMEOUT_S)
            except (BrokerUnavailableError, KafkaException):  # the broker is restarting: next time
                self.counts["injections_skipped_broker_down"] += 1
            except TimeoutError:
                self.counts[f"{kind}_timed_out"] += 1
                print(
                    f"chaos: injection {kind} got no answer within {INJECTION_TIMEOUT_S:.0f} s "
                    f"(last: {self.last_injection})",
                    flush=True,
                )

    def _accepted(self) -> str | None:
        return self.rng.choice(sorted(self.exp.run_ids)) if self.exp.run_ids else None

    async def _inject_duplicate_start(self) -> None:
        wf = self._accepted()
        if wf is None:
            return
        n = int(wf.split("-")[1])
        self.last_injection = ("duplicate_start", wf)
        try:
            handle = await self._start_order(n, wf, what="duplicate_start")
        except WorkflowAlreadyStartedError as exc:
            self.violations.append(
                Violation("completion", f"a retried start was rejected instead of answered: {exc}", (wf,))
            )
            return
        if handle.run_id != self.exp.run_ids[wf]:
            self.violations.append(
                Violation(
                    "completion",
                    f"a retried start got run {handle.run_id}, the first got {self.exp.run_ids[wf]}",
                    (wf,),
                )
            )
        self.counts["duplicate_starts"] += 1

    async def _inject_duplicate_signal(self) -> None:
        if not self.exp.signals:
            return
        rid = self.rng.choice(sorted(self.exp.signals))
        wf = self.exp.signals[rid]
        self.last_injection = ("duplicate_signal", wf)
        await self._retry(
            "duplicate_signal", lambda: send_signal(self.client, wf, rid, approval_for(int(wf.split("-")[1])))
        )
        self.counts["duplicate_signals"] += 1

    async def _inject_duplicate_update(self) -> None:
        if not self.exp.updates:
            return
        rid = self.rng.choice(sorted(self.exp.updates))
        wf = self.exp.updates[rid]
        n = int(wf.split("-")[1])
        self.last_injection = ("duplicate_update", wf)
        got = await self._retry("duplicate_update", lambda: send_update(self.client, wf, rid, n))
        self._check_update(wf, rid, got, update_result(n))
        self.counts["duplicate_updates"] += 1

    async def _inject_rejected_update(self) -> None:
        wf = self._accepted()
        if wf is None:
            return
        rid = f"rejected-{self.counts['rejected_updates']}-{wf}"
        self.last_injection = ("rejected_update", wf)
        try:
            got = await self._retry("rejected_update", lambda: send_update(self.client, wf, rid, -1))
        except WorkflowUpdateFailedError as exc:
            if not exc.rejected:
                self.violations.append(
                    Violation("update", f"update {rid} failed instead of being rejected: {exc}", (wf,))
                )
        else:
            self.violations.append(Violation("update", f"update {rid} with k=-1 was accepted: {got!r}", (wf,)))
        self.exp.rejected_updates[rid] = wf
        self.counts["rejected_updates"] += 1

    async def _inject_pause(self) -> None:
        # (runs whose start reply named them: an executed order's run ID is not known here)
        live = sorted(
            wf for wf, t in self._results.items() if not t.done() and wf not in self._paused and wf in self.exp.run_ids
        )
        if not live:
            return
        wf = self.rng.choice(live)
        k = self.counts["pauses"]
        prid, urid = f"pause-{k}-{wf}", f"unpause-{k}-{wf}"
        # expected before they are sent: a request whose reply is lost may still be recorded
        self.exp.pauses[prid] = self.exp.pauses[urid] = wf
        self._paused.add(wf)
        self.last_injection = ("pause", wf)
        handle = self.client.get_workflow_handle(wf)
        try:
            for _ in range(2):  # the second is a retry with the same request ID: recorded once
                await self._retry("pause", lambda: handle.pause(reason="chaos", request_id=prid))
        except WorkflowError:  # it closed meanwhile: refused, nothing recorded
            self.counts["pauses_refused"] += 1
        finally:
            self.counts["pauses"] += 1
            # not part of this injection (whose time limit would cancel it): the unpause must come
            self._spawn(self._unpause_later(handle, urid))

    async def _unpause_later(self, handle, rid: str) -> None:
        await asyncio.sleep(self.rng.uniform(0.5, 4.0))
        try:
            for _ in range(2):
                await self._retry("unpause", lambda: handle.unpause(reason="chaos", request_id=rid), deadline_s=3600)
            self.counts["unpauses"] += 1
        except WorkflowError:  # closed while paused (a workflow task that was out completed it)
            self.counts["unpauses_refused"] += 1
        finally:
            self._paused.discard(handle.id)

    async def _history(self, wf: str) -> list[dict]:
        run_id = self.exp.run_ids[wf]
        _run, events = await self.client.engine.history(wf, run_id)
        return events

    def _send_raw(self, wf: str, body_type: str, body: dict) -> None:
        self.client.engine.send(
            wf, body_type, body, request_id=new_id(), run_id=self.exp.run_ids[wf], expect_reply=False
        )

    async def _inject_stale_task(self) -> None:
        wf = self._accepted()
        if wf is None:
            return
        self.last_injection = ("stale_task", wf)
        events = await self._history(wf)
        done = [e["attributes"][1]["scheduled_seq"] for e in events if e["attributes"][0] == "WorkflowTaskCompleted"]
        if not done:
            return
        seq = self.rng.choice(done)
        self._send_raw(
            wf,
            "RespondWorkflowTaskCompleted",
            {
                "scheduled_seq": seq,
                "identity": "chaos-stale",
                "build_id": None,
                "commands": [("CompleteWorkflowExecution", {"result": self.client.converter.to_bytes("STALE")})],
            },
        )
        self.counts["stale_task_completions"] += 1

    async def _inject_late_activity(self) -> None:
        # a few workflows: the current run of the one drawn first may have no finished activity
        # yet (just started, or continued as new); a seed once drew only such runs (issue 15)
        finished = sorted(
            wf
            for wf, t in self._results.items()
            if t.done() and not t.cancelled() and t.exception() is None and wf in self.exp.run_ids
        )
        for _ in range(5):
            # a workflow whose result came has finished activities; before any has, any workflow
            wf = self.rng.choice(finished) if finished else self._accepted()
            if wf is None:
                return
            self.last_injection = ("late_activity", wf)
            events = await self._history(wf)
            over = [
                e["attributes"][1]
                for e in events
                if e["attributes"][0] in ("ActivityTaskCompleted", "ActivityTaskAttemptFailed")
            ]
            if over:
                break
        else:
            return
        a = self.rng.choice(over)
        self._send_raw(
            wf,
            "RespondActivityTaskCompleted",
            {
                "activity_id": a["activity_id"],
                "scheduled_seq": a["scheduled_seq"],
                "attempt": a["attempt"],
                "result": self.client.converter.to_bytes(-1),
                "identity": "chaos-late",
            },
        )
        self.counts["late_activity_completions"] += 1

    async def _inject_undecodable(self) -> None:
        i = self.counts["undecodable_records"]
        wf = self._accepted()
        key = (wf or f"garbage-{i}").encode()
        value = (
            b"\x00chaos garbage %d " % i if i % 2 == 0 else b"K\x01" + b"\xff" * 12 + b" chaos %d" % i
        ) + self.rng.randbytes(8)
        loop = asyncio.get_running_loop()
        delivered = loop.create_future()

        def on_delivery(err, _msg):
            loop.call_soon_threadsafe(lambda: delivered.done() or delivered.set_result(err))

        self._producer.produce(Catalogue(self.config).commands, value, key, on_delivery=on_delivery)
        while not delivered.done():
            self._producer.poll(0)
            await asyncio.sleep(0.05)
        if delivered.result() is None:
            self.exp.garbage.append((key, value))
            self.counts["undecodable_records"] += 1

    # -- the end -------------------------------------------------------------------------------

    async def drain(self, timeout: float) -> list[str]:
        """Wait for the starts and signals in flight, then for every result; the workflow IDs
        that did not complete in time (the checker reports them)."""
        deadline = time.monotonic() + timeout
        pending = [t for t in self._tasks if t not in self._results.values()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        unsent = sorted(
            self.exp.signals.keys() ^ {f"signal-{self.workflow_id(i)}" for i in range(self.n) if wants_signal(i)}
        )
        if unsent:
            print(f"chaos: signals not accepted by the end of the drain: {unsent[:10]}")
        unsent = sorted(
            self.exp.updates.keys() ^ {f"update-{self.workflow_id(i)}" for i in range(self.n) if wants_update(i)}
        )
        if unsent:
            print(f"chaos: updates not answered by the end of the drain: {unsent[:10]}")
        done, not_done = await asyncio.wait(list(self._results.values()), timeout=max(1.0, deadline - time.monotonic()))
        late = sorted(wf for wf, t in self._results.items() if t in not_done)
        for wf, t in sorted(self._results.items()):
            if t in done and t.exception() is None and t.result() != self.exp.results[wf]:
                self.violations.append(
                    Violation("completion", f"result reply {t.result()!r} differs from {self.exp.results[wf]!r}", (wf,))
                )
            elif t in done and t.exception() is not None:
                self.violations.append(Violation("completion", f"result request failed: {t.exception()!r}", (wf,)))
        for t in not_done:
            t.cancel()
        return late

    async def barrier(self, timeout: float = 90.0) -> list[int]:
        """Wait until every commands partition has processed everything produced so far (a
        describe request is answered only after the commands before it); the partitions that
        did not answer within ``timeout`` seconds of a serving broker (a stuck processor): the
        time the broker itself did not answer (``BrokerClock``) is added, up to ``BARRIER_CAP``
        times ``timeout`` in all."""
        by_partition = {}
        for wf in sorted(self.exp.run_ids):
            by_partition.setdefault(partition_for(wf, self.config.partitions), wf)
        stuck = []
        with BrokerClock(self.config, Catalogue(self.config).commands) as clock:
            for p, wf in sorted(by_partition.items()):
                handle = self.client.get_workflow_handle(wf)
                started, lost_at_start = time.monotonic(), clock.unresponsive_s
                while True:
                    try:
                        await handle.describe()
                        break
                    except BrokerUnavailableError:
                        self.counts["barrier_retries"] += 1
                        waited = time.monotonic() - started
                        lost = clock.unresponsive_s - lost_at_start
                        if waited - lost > timeout or waited > BARRIER_CAP * timeout:
                            stuck.append(p)
                            break
                        await asyncio.sleep(0.5)
            self.counts["barrier_broker_unresponsive_s"] = round(clock.unresponsive_s)
        return stuck

    def close(self) -> None:
        self._producer.flush(10)
