"""The history processor: consumes ``{ns}.commands`` and commits each batch as one transaction.

For every batch (adaptive: whatever is ready, up to ``max_batch``) it produces the new history
events, the new state records, the workflow and activity tasks, the replies and the consumed
offsets in ONE Kafka transaction (EOS v2, KIP-447, with the consumer's group metadata). The local
stores change only after the commit succeeds; on abort the batch's writes are dropped and the
consumer rewinds to the committed offsets.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from opentelemetry.trace import TracerProvider
from prometheus_client import CollectorRegistry

from kadence.schemas.records import ConcurrencyState
from kadence.topics.broker_wait import assign_at_committed, committed_offsets, until_broker_answers
from kadence.topics.catalogue import Catalogue
from kadence.topics.codec_metrics import register_codec_metrics
from kadence.topics.config import PAUSING_FETCH_WAIT_MS
from kadence.topics.errors import (
    BrokerUnavailableError,
    SchemaError,
    WorkflowQuarantinedError,
)
from kadence.topics.log_context import reset_log_fields, set_log_fields
from kadence.topics.polling import poll_ready, raise_if_refused, resume_awake
from kadence.topics.produce import produce_waiting
from kadence.topics.records import command, now_ms
from kadence.topics.tracing import Tracer, record_ref
from kadence.topics.transactions import GuardedCall, TxnCallHung, TxnWatchdog, start_transactional

from .builds import BacklogReporter, BuildDefaults, QueueRules
from .concurrency_store import restore_limits
from .deadlines import DeadlineIndex
from .disk_store import DiskShardStore
from .effects import BatchView, Outbox, reply
from .outputs import OutputWriter, reply_partition
from .processor_config import ProcessorConfig, claim_state_dir, group_membership
from .processor_metrics import ProcessorMetrics
from .routing import InlineDelivery, wrong_partition
from .shard_store import ShardStore
from .store import MemoryShardStore, restore_shard
from .traced import traced_transition

__all__ = ["EXIT_TXN_STALLED", "HistoryProcessor", "ProcessorConfig"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: exit status of a processor whose transaction call hung (see ``TxnWatchdog``); whoever runs it
#: restarts it, and it takes its shards back once the group drops its old member (a session timeout)
EXIT_TXN_STALLED = 75
#: hung transaction calls, given up on and still not returned, that one process tolerates before
#: it exits with EXIT_TXN_STALLED (each holds a librdkafka client and a thread)
MAX_HUNG_PRODUCERS = 8


class HistoryProcessor:
    """One processor instance. ``run()`` blocks until ``stop()``."""

    def __init__(
        self,
        config: ProcessorConfig,
        *,
        registry: CollectorRegistry | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.config = config
        #: spans of traced commands (``topics.tracing``; None: the global tracer provider)
        self._tracer = Tracer("processor", tracer_provider)
        self.kafka = config.kafka
        self.topics = Catalogue(config.kafka)
        registry = registry or CollectorRegistry()
        self.metrics = ProcessorMetrics(registry, config.kafka.namespace)
        register_codec_metrics(registry)
        self._stop = threading.Event()
        self._stores: dict[int, ShardStore] = {}
        #: each shard's concurrency limits by key (``processors.concurrency``)
        self._limits: dict[int, dict[str, ConcurrencyState]] = {}
        #: per shard, the workflows whose records the restore could not decode: workflow ID -> why
        #: (``restore_shard``; their commands are dead-lettered and answered ``quarantined``)
        self._quarantine: dict[int, dict[str, str]] = {}
        self._inline = InlineDelivery(self._stores, self._quarantine, self._view, self._tracer)
        #: per shard: the activity timeouts of its workflows (decision 0026)
        self._deadlines: dict[int, DeadlineIndex] = {}
        self._state_dir: Path | None = None
        self._builds = BuildDefaults(config.kafka, registry)
        self._rules = QueueRules(config.kafka)
        self._task_retry = config.task_retry
        self._backlog = (
            BacklogReporter(config.kafka, registry, config.build_backlog_interval_s)
            if config.build_backlog_interval_s > 0
            else None
        )
        self._outputs = OutputWriter(
            self.topics,
            self._produce,
            task_max_bytes=config.task_max_bytes,
            oversized_tasks=self.metrics.tasks_without_events,
        )
        self._cmd_codec = self._outputs.cmd_codec
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self.committed_batches = 0
        #: how many partitions ``{ns}.commands`` has (set when the topics are checked)
        self._command_partitions = 0
        #: partitions paused while a batch is processed (``_pause_fetching``)
        self._paused: list[TopicPartition] = []
        #: per owned commands partition: the offset this instance's last commit (or the owner
        #: before it) left committed, re-sent by a transaction that consumed nothing there
        #: (``_fencing_offsets``)
        self._fence_offsets: dict[int, int] = {}
        self._watchdog = TxnWatchdog(config.txn_stall_exit_s, self._stalled)
        self._guarded = GuardedCall(f"kadence-txn-{config.instance_id}", base_s=config.txn_hang_s)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether ``run()`` got past waiting for the broker and serves (what readiness reports)."""
        return self._consumer is not None

    @property
    def _live_consumer(self) -> Consumer:
        """The consumer of a processor that serves (``run()`` made it before any batch)."""
        assert self._consumer is not None, "the processor is not serving"
        return self._consumer

    @property
    def _live_producer(self) -> Producer:
        """The current transactional producer of a processor that serves."""
        assert self._producer is not None, "the processor is not serving"
        return self._producer

    def stop(self) -> None:
        self._stop.set()

    def _make_producer(self) -> Producer:
        conf = self.kafka.transactional_producer(
            f"{self.kafka.namespace}.processor.{self.config.instance_id}",
            **{
                "transaction.timeout.ms": self.config.transaction_timeout_ms,
                "acks": "all",
                # librdkafka retries AddPartitionsToTxn/AddOffsetsToTxn while the broker still
                # completes the previous transaction (CONCURRENT_TRANSACTIONS); the default 100 ms
                # backoff made every other step wait ~100 ms (measured: 108 ms/txn -> 18 ms at 10 ms)
                "retry.backoff.ms": 10,
            },
        )
        return start_transactional(lambda: Producer(conf), what=f"processor {self.config.instance_id}", stop=self._stop)

    def _make_consumer(self) -> Consumer:
        consumer = Consumer(
            self.kafka.consumer(
                self.topics.processor_group,
                **{
                    # dynamic membership, not static (decision 0036): a static member restarted between
                    # the two rounds of a cooperative rebalance left the shards it was revoking unowned;
                    # the client ID names the instance in the group's description
                    "client.id": f"{self.topics.processor_group}.{self.config.instance_id}",
                    **group_membership(self.config),
                    # the loop pauses its partitions for each batch
                    "fetch.wait.max.ms": min(PAUSING_FETCH_WAIT_MS, self.kafka.fetch_wait_ms),
                    "enable.auto.offset.store": False,
                },
            )
        )
        consumer.subscribe(
            [self.topics.commands], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )
        return consumer

    def _new_store(self, partition: int) -> ShardStore:
        if self.config.store == "memory":
            return MemoryShardStore(partition)
        if self._state_dir is None:
            self._state_dir = claim_state_dir(
                Path(self.config.state_dir or tempfile.gettempdir()),
                f"kadence-store-{self.kafka.namespace}-{self.config.instance_id}",
            )
        return DiskShardStore(partition, self._state_dir / f"p{partition}")

    def _release(self, partition: int) -> None:
        self._fence_offsets.pop(partition, None)
        self._deadlines.pop(partition, None)
        self._quarantine.pop(partition, None)
        self.metrics.forget_limits(list(self._limits.pop(partition, None) or ()))
        store = self._stores.pop(partition, None)
        if store is not None:
            store.close()

    def _until_broker_answers(self, what: str, step: Callable[[], T]) -> T:
        """``step()``, retried with backoff while the broker is unreachable (a processor started
        before the broker, or one that meets a restart while it restores), instead of exiting."""
        return until_broker_answers(
            step, what=what, who=f"processor {self.config.instance_id}", stop=self._stop, log=log
        )

    def run(self) -> None:
        self._until_broker_answers("checking topics", self._check_topics)
        # the default build of every queue, before the first start is processed
        self._until_broker_answers("reading build defaults", self._builds.start)
        self._until_broker_answers("reading queue rules", self._rules.start)
        if self._backlog is not None:
            self._backlog.start()
        self._producer = self._make_producer()
        self._consumer = self._make_consumer()
        log.info("processor %s started (namespace %s)", self.config.instance_id, self.kafka.namespace)
        self._watchdog.start()
        try:
            while not self._stop.is_set():
                msgs = self._poll_batch(self._poll_timeout())
                self.metrics.lag.sample(self._consumer)
                self._builds.poll()  # after the commands: a promotion acknowledged before a start is seen by it
                self._rules.poll()
                fired = self._due_deadlines()
                if msgs or fired:
                    self._pause_fetching(len(msgs))
                    try:
                        self._process_batch(msgs, fired)
                    finally:
                        self._resume_fetching()
        finally:
            self._watchdog.stop()
            self._shutdown()

    def _stalled(self, blocked_s: float) -> None:
        self._exit_stalled(f"a transaction has been blocked for {blocked_s:.0f} s")

    def _exit_stalled(self, why: str) -> None:
        log.critical(
            "processor %s: %s (librdkafka #5511); exiting with status %d so that a restart takes its shards back",
            self.config.instance_id,
            why,
            EXIT_TXN_STALLED,
        )
        logging.shutdown()
        os._exit(EXIT_TXN_STALLED)

    def _check_topics(self) -> None:
        have = self.topics.require(self.topics.processor_topics())
        if late := self.topics.late_specs(have):  # a namespace made before concurrency limits or streams
            self.topics.apply(late)
        self._outputs.stream_partitions = have.get(self.topics.streams) or have[self.topics.commands]
        self._outputs.reply_partition = reply_partition(self.config.instance_id, have[self.topics.replies])
        self._command_partitions = self._inline.partitions = have[self.topics.commands]

    def _shutdown(self) -> None:
        self._guarded.close()
        if self._backlog is not None:
            self._backlog.stop()
        self._builds.close()
        self._rules.close()
        if self._consumer is not None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as exc:
                log.warning("consumer close: %s", exc)
        if self._producer is not None:
            self._producer.flush(5)
        for partition in list(self._stores):
            self._release(partition)
        if self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
        log.info("processor %s stopped", self.config.instance_id)

    # -- rebalance -----------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        # Block until no transaction of a previous owner is pending on these partitions
        # (OffsetFetch with require_stable under read_committed), so the stores we restore
        # reflect every committed batch up to the offsets we will resume from.
        # The partitions are assigned here at those offsets, so librdkafka asks for none itself
        # (librdkafka #5586: its own query, refused with NOT_COORDINATOR, is never retried).
        wait_s = max(60.0, self.config.transaction_timeout_ms / 1000 * 3)
        # librdkafka keeps a partition's pause across a rebalance: one paused when it was taken
        # away would stay paused when assigned again. The loop resumes what it pauses before it
        # polls again, so this is a guard, not a known path. Here, before the partitions are
        # assigned, a resume cannot drop fetched records: none are queued yet.
        consumer.resume(partitions)
        committed = {
            tp.partition: tp.offset
            for tp in assign_at_committed(
                consumer,
                partitions,
                timeout=wait_s,
                what=self.topics.commands,
                who=f"processor {self.config.instance_id}",
                stop=self._stop,
                log=log,
            )
        }
        for tp in partitions:
            self._release(tp.partition)
            offset = committed.get(tp.partition, -1)
            self._fence_offsets[tp.partition] = (
                offset
                if offset >= 0
                else self._until_broker_answers(
                    f"reading where partition {tp.partition} begins", functools.partial(self._log_start, tp)
                )
            )
            self._stores[tp.partition], self._deadlines[tp.partition], self._quarantine[tp.partition] = (
                self._until_broker_answers(
                    f"restoring partition {tp.partition}", functools.partial(self._restore, tp.partition)
                )
            )
            limits = functools.partial(restore_limits, self.kafka, self.topics.concurrency, tp.partition)
            self._limits[tp.partition] = self._until_broker_answers(f"restoring partition {tp.partition}", limits)
        log.info(
            "processor %s assigned partitions %s", self.config.instance_id, sorted(tp.partition for tp in partitions)
        )

    def _restore(self, partition: int) -> tuple[ShardStore, DeadlineIndex, dict[str, str]]:
        """A shard's store, deadline index and quarantined workflows, rebuilt from Kafka (a failed
        try leaves nothing open)."""
        index, store = DeadlineIndex(), self._new_store(partition)
        quarantine: dict[str, str] = {}
        t0 = time.perf_counter()
        try:
            restored = (
                restore_shard(
                    self.kafka,
                    self.topics.state,
                    self.topics.history,
                    partition,
                    store,
                    observe=index.update,
                    quarantine=quarantine,
                ),
                index,
                quarantine,
            )
            self.metrics.restore.observe(time.perf_counter() - t0)
            return restored
        except BaseException:
            store.close()
            raise

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._release(tp.partition)
        if partitions:
            log.info(
                "processor %s released partitions %s",
                self.config.instance_id,
                sorted(tp.partition for tp in partitions),
            )

    # -- the loop ------------------------------------------------------------------------------

    def _poll_timeout(self) -> float:
        """Wait for commands at most 0.1 s, and not past the earliest activity deadline."""
        due = [d for d in (index.next_due_ms() for index in self._deadlines.values()) if d is not None]
        if not due:
            return 0.1
        return min(0.1, max(0.0, (min(due) - now_ms()) / 1000))

    def _due_deadlines(self) -> dict[int, list[Any]]:
        """Per shard, the activity deadlines that have passed (as many as a batch takes)."""
        fired: dict[int, list[Any]] = {}
        now, room = now_ms(), self.config.max_batch
        for p, index in self._deadlines.items():
            if room <= 0:
                break
            due = index.due(now, room)
            if due:
                fired[p] = due
                room -= len(due)
        return fired

    def _pause_fetching(self, taken: int) -> None:
        """Stop fetching commands while a batch is processed (decision 0028).

        With commands arriving all the time, librdkafka fetches again as soon as a fetch returns:
        about 30 fetches of a few records each per batch, each a broker request. Paused, the
        commands wait in Kafka; fetching resumes when the transaction is sent for commit, so the
        next batch is fetched while the commit completes. Not when the batch was full: then
        more are queued already, and a pause would drop them (librdkafka discards a paused
        partition's fetched records and fetches them again on resume). Partitions that have
        returned no record since they were assigned have no position to resume from
        (``_resume_fetching``) and go on fetching."""
        if taken == 0 or taken >= self.config.max_batch:
            return
        assignment = self._live_consumer.assignment()
        if not assignment:
            return
        self._paused = [
            TopicPartition(tp.topic, tp.partition, tp.offset)
            for tp in self._live_consumer.position(assignment)
            if tp.offset >= 0
        ]
        if self._paused:
            self._live_consumer.pause(self._paused)

    def _resume_fetching(self) -> None:
        paused, self._paused = self._paused, []
        if not paused:
            return
        # no poll ran since the pause, so no rebalance either: the assignment is the same, and
        # each partition still stands at the position recorded when it was paused
        resume_awake(self._live_consumer, paused)

    def _poll_batch(self, timeout: float = 0.1) -> list[Any]:
        """Adaptive batch: wait for the first command, then take whatever else is ready."""
        msgs = poll_ready(self._live_consumer, self.config.max_batch, timeout)
        out = []
        for m in msgs:
            err = m.error()
            if err is None:
                out.append(m)
            elif err.fatal() or err.code() == KafkaError._FATAL:  # a dead consumer: exit, be restarted
                raise KafkaException(err)
            elif err.code() != KafkaError._PARTITION_EOF:
                raise_if_refused(err, session_timeout_ms=self.config.session_timeout_ms)
                log.warning("consumer error: %s", err.str())
        return out

    def _process_batch(self, msgs: list[Any], fired: dict[int, list[Any]] | None = None) -> None:
        views: dict[int, BatchView] = {}
        outboxes: dict[int, Outbox] = {}
        dead: list[Any] = []
        offsets: dict[tuple[str, int], int] = {}
        ts = now_ms()
        fired = fired or {}
        for msg in msgs:
            p = msg.partition()
            store = self._stores.get(p)
            if store is None:  # revoked while the batch was buffered: its new owner processes it
                continue
            offsets[(msg.topic(), p)] = msg.offset() + 1
            view = views.get(p) or views.setdefault(p, self._view(p, store))
            out = outboxes.get(p) or outboxes.setdefault(p, Outbox())
            try:
                cmd = self._cmd_codec.decode(msg.value())
                if msg.key() is not None and cmd["aggregate_key"].encode() != msg.key():
                    raise SchemaError("record key differs from the command's aggregate_key (workflow ID)")
            except SchemaError as exc:
                dead.append((msg, "undecodable command", exc))
                continue
            wf = cmd["aggregate_key"]
            wrong = wrong_partition(self.topics.commands, wf, p, self._command_partitions)
            if wrong is not None:  # its workflow would live where no reader looks for it
                dead.append((msg, "wrong partition", wrong))
                reply(out, cmd["request_id"], wf, "wrong_partition", message=str(wrong))
                continue
            why = self._quarantine[p].get(wf) if self._quarantine.get(p) else None
            if why is not None:  # its state is not in the store: kept for a redrive after the repair
                dead.append((msg, "quarantined workflow", WorkflowQuarantinedError(why, workflow_id=wf)))
                reply(out, cmd["request_id"], wf, "quarantined", message=f"workflow {wf!r} is quarantined: {why}")
                continue
            checkpoint, mark = view.checkpoint(wf), out.mark()
            fields = set_log_fields(wf, cmd.get("run_id"), p, cmd.get("trace_id"))
            try:
                traced_transition(self._tracer, cmd, view, out, ts, mark, record_ref(cmd))
            except Exception as exc:
                log.exception("command failed on workflow %s partition %d", wf, p)
                view.rollback(wf, checkpoint)
                out.truncate(mark)
                dead.append((msg, "transition failed", exc))
            finally:
                reset_log_fields(fields)
        # passed deadlines after the commands: a completion or heartbeat that reached the engine before
        # it acted on a timeout counts (the timeout then finds its attempt over: stale, no effect)
        for p, due in fired.items():
            store = self._stores.get(p)
            if store is None:
                continue
            view = views.get(p) or views.setdefault(p, self._view(p, store))
            out = outboxes.get(p) or outboxes.setdefault(p, Outbox())
            for wf, run_id, body in due:
                fields = set_log_fields(wf, run_id, p)
                log.info(
                    "workflow %s run %s partition %d: %s deadline passed (%s)",
                    wf,
                    run_id,
                    p,
                    body["kind"],
                    body["timer_id"],
                )
                checkpoint, mark = view.checkpoint(wf), out.mark()
                try:
                    traced_transition(self._tracer, self._deadline_command(wf, run_id, body), view, out, ts, mark, None)
                except Exception:
                    log.exception("deadline %s failed on workflow %s partition %d", body["timer_id"], wf, p)
                    view.rollback(wf, checkpoint)
                    out.truncate(mark)
                finally:
                    reset_log_fields(fields)
        self._inline.deliver(views, outboxes, ts)  # concurrency slots of shards this instance owns
        committed = self._commit(msgs, views, outboxes, dead, offsets, fired)
        for p, due in fired.items():
            index, store = self._deadlines.get(p), self._stores.get(p)
            if index is not None and store is not None:
                index.settle(due, committed, store.get_state)
        if committed:
            self.metrics.deadlines.inc(sum(len(due) for due in fired.values()))

    def _view(self, p: int, store: ShardStore) -> BatchView:  # the shard's, with its concurrency limits
        return BatchView(
            store, self._builds.defaults, self._task_retry, self._limits.setdefault(p, {}), self._rules.limits
        )

    def _deadline_command(self, wf: str, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """The FireTimer command the timer service would have sent for this deadline (as decoded)."""
        return self._cmd_codec.decode(self._cmd_codec.encode(command(wf, "FireTimer", body, run_id=run_id)))

    def _log_start(self, tp: TopicPartition) -> int:
        """Where a commands partition with no committed offset begins (its consumer starts there).
        An answer the broker could not give (NOT_LEADER_FOR_PARTITION while it restarts: chaos
        seed 3284639093 killed a processor that way, its first assignment meeting a broker
        restart) is a ``BrokerUnavailableError``, which the assignment waits out."""
        try:
            low, _high = self._live_consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=30)
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise
            raise BrokerUnavailableError(f"cannot read where {tp.topic}[{tp.partition}] begins: {exc}") from exc
        return max(low, 0)

    def _fencing_offsets(
        self, outboxes: dict[int, Outbox], offsets: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """The consumed offsets to send with a batch: one for EVERY shard the batch writes.

        ``send_offsets_to_transaction`` is the only thing that stops a stale owner's transaction:
        the group coordinator refuses the offsets of a member from an earlier generation, and the
        transaction aborts. Transactional IDs are per instance, so a new owner does not fence the
        old one's producer. A shard the batch writes without having consumed from it (a passed
        activity deadline is work the processor started by itself) gets its last committed offset
        again: re-committing an unchanged offset still makes the coordinator check the
        generation. Without it, a processor paused past its session timeout wakes, fires a
        deadline its successor has already fired, and commits (issue 15)."""
        fenced = dict(offsets)
        for p in outboxes:
            key = (self.topics.commands, p)
            if key not in fenced:
                fenced[key] = self._fence_offsets[p]
        return fenced

    def _commit(
        self,
        msgs: list[Any],
        views: dict[int, BatchView],
        outboxes: dict[int, Outbox],
        dead: list[Any],
        offsets: dict[tuple[str, int], int],
        fired: dict[int, list[Any]] | None = None,
    ) -> bool:
        outboxes = {p: out for p, out in outboxes.items() if p in self._stores}
        if not offsets and not outboxes:
            return False  # every record belonged to partitions this instance no longer owns
        offsets = self._fencing_offsets(outboxes, offsets)
        producer = self._live_producer
        t0 = time.perf_counter()
        self._watchdog.begin()
        try:
            producer.begin_transaction()
            self._outputs.write(views, outboxes, dead)
            tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            group = self._live_consumer.consumer_group_metadata()
            self._guarded(lambda: producer.send_offsets_to_transaction(tps, group, 30))
            self._resume_fetching()  # the next batch is fetched while this one commits
            producer.commit_transaction(30)
        except KafkaException as exc:
            self._on_txn_error(exc)
            return False
        except TxnCallHung as exc:
            self._on_txn_hung(exc)
            return False
        except BrokerUnavailableError as exc:
            # the batch needs a topic created (a queue this instance has not seen yet) while the
            # broker does not answer (a chaos seed's processor exited here during a restart):
            # the open transaction is aborted and the batch read again, as for a failed commit
            log.warning("cannot produce the batch (%s); dropping it and rewinding", exc)
            self._on_txn_error(KafkaException(KafkaError(KafkaError._TRANSPORT, str(exc), txn_requires_abort=True)))
            return False
        finally:
            self._watchdog.end()
        for (_t, p), o in offsets.items():
            if p in self._fence_offsets:
                self._fence_offsets[p] = o
        self.metrics.commit.observe(time.perf_counter() - t0)
        self.metrics.batches.observe(len(msgs))
        self.metrics.commands.inc(len(msgs))
        self.metrics.dlq.inc(len(dead))
        for p, view in views.items():
            store = self._stores.get(p)
            if store is not None:
                view.commit_into(store)
                index = self._deadlines.get(p)
                if index is not None:
                    for wf, st in view.states.items():
                        index.update(wf, st)
                    for wf in view.tombstones():
                        index.update(wf, None)
        for out in outboxes.values():
            self.metrics.committed(out)
        for view in views.values():
            self.metrics.limits(view.limits)
        self.committed_batches += 1
        return True

    def _produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        produce_waiting(self._live_producer, topic, value, key, partition=partition, headers=headers, wait_s=0.01)

    def _on_txn_error(self, exc: KafkaException) -> None:
        err = exc.args[0] if exc.args else None
        self.metrics.aborts.inc()
        log.warning(
            "transaction failed (%s); dropping the batch and rewinding",
            err.str() if isinstance(err, KafkaError) else exc,
        )
        fatal = not isinstance(err, KafkaError) or err.fatal() or not err.txn_requires_abort()
        if not fatal:
            try:
                self._live_producer.abort_transaction(30)
            except KafkaException as abort_exc:
                log.warning("abort failed (%s); recreating the producer", abort_exc)
                fatal = True
        if isinstance(err, KafkaError) and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED):
            # our own replacements are made current before they fence: a fence seen here came
            # from a process that started with our instance ID (a restart of this slot while this
            # one was paused), or from the broker aborting a transaction that outlived its timeout
            log.warning(
                "processor %s: producer fenced; if this repeats, another running process has "
                "the same instance ID (KADENCE_PROCESSOR_ID) and the two keep fencing each other",
                self.config.instance_id,
            )
        if fatal:
            # librdkafka lacks the client side of KIP-890: a commit or abort that failed or timed
            # out leaves the producer unusable; a new one (same transactional.id) fences it.
            try:
                self._live_producer.flush(1)
            except KafkaException:
                pass
            self._producer = self._make_producer()
        self._rewind()

    def _on_txn_hung(self, exc: TxnCallHung) -> None:
        """``send_offsets_to_transaction`` did not return (librdkafka #5511): the producer is left
        inside it, and a new one with the same ``transactional.id`` fences it (its transaction is
        aborted by the coordinator, so nothing of the batch is committed) before the batch is
        read again. Too many stuck helpers (each keeps a librdkafka client) end the process."""
        self.metrics.aborts.inc()
        self.metrics.hung.inc()
        if self._guarded.stuck > MAX_HUNG_PRODUCERS:
            self._exit_stalled(f"{self._guarded.stuck} transaction calls have not returned")
        log.warning(
            "processor %s: %s (librdkafka #5511); replacing the producer, dropping the batch and rewinding",
            self.config.instance_id,
            exc,
        )
        self._producer = self._make_producer()
        self._rewind()

    def _rewind(self) -> None:
        if self._paused:  # resumed here without the waking seek: the seeks below restart fetching
            self._live_consumer.resume(self._paused)
            self._paused = []
        assignment = self._live_consumer.assignment()
        if not assignment:
            return
        committed = self._until_broker_answers(
            "rewinding to the committed offsets",
            lambda: committed_offsets(self._live_consumer, assignment, 60, self.topics.commands),
        )
        for tp in committed:
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING  # nothing committed yet (auto.offset.reset=earliest)
            try:
                self._live_consumer.seek(tp)
            except KafkaException as exc:
                log.warning("seek %s[%d] failed: %s", tp.topic, tp.partition, exc)
