"""The engine's client side, shared by the SDK's ``Client`` and the HTTP gateway.

It produces commands to ``{ns}.commands`` (keyed by workflow ID) and waits for their replies on
``{ns}.replies``. Before the first command that expects a reply is produced, a background thread
starts to consume every partition of the replies topic from its end at that moment, so a reply
produced after the command cannot be missed. A process that never waits for a reply (a worker
that only reports task results) never reads the replies topic; the thread decodes only the
replies whose key (the request ID) it is waiting for.

librdkafka can leave a consumer that lived through a broker restart assigned and polling and
never fetching again (librdkafka #5153, open; seen in a ``make chaos`` seed: the load driver's
client got no reply after a broker restart while every reply was on the topic). So the reply
thread watches for it: while a reply is awaited, nothing has arrived for ``replies_stall_s`` and
the broker reports records past the position on some partition, the consumer is replaced by one
assigned at the same positions (``_check_replies``).
Futures are ``concurrent.futures.Future``; asyncio callers wrap them with ``asyncio.wrap_future``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from opentelemetry.trace import TracerProvider

from . import serde
from .catalogue import Catalogue
from .concurrency_reader import read_limits
from .config import KafkaConfig
from .errors import (
    BrokerUnavailableError,
    KadenceError,
    NoReplyError,
    PayloadTooLargeError,
    WorkflowQuarantinedError,
    WrongPartitionError,
)
from .kafka_access import metadata
from .polling import poll_ready
from .produce import produce_waiting
from .records import command
from .replacing_producer import ReplacingProducer
from .run_histories import RunHistories
from .stream_hub import StreamHub, StreamReader
from .streams import StreamEntry
from .tracing import FROM_CALLER, FromCaller, Tracer, TraceRef

__all__ = ["EngineClient"]

log = logging.getLogger(__name__)


def _close_quietly(consumer: Consumer) -> None:
    try:
        consumer.close()
    except (KafkaException, RuntimeError) as exc:
        log.debug("closing a replaced reply consumer: %s", exc)


class EngineClient:
    """Send commands, await replies, read history. Thread-safe; one per process is plenty."""

    def __init__(
        self,
        config: KafkaConfig,
        *,
        connect_timeout: float = 15.0,
        producer_stall_s: float = 30.0,
        producer_factory: Callable[[dict[str, Any]], Producer] = Producer,
        tracer_provider: TracerProvider | None = None,
        resend_after_s: float = 10.0,
        replies_stall_s: float = 15.0,
        consumer_factory: Callable[[dict[str, Any]], Consumer] = Consumer,
    ) -> None:
        self.config = config
        #: the reply consumer is replaced when it has delivered nothing for this many seconds
        #: while a reply is awaited and records lie past its position (0: never). Above the
        #: processors' transaction timeout (10 s), which bounds how long an open transaction can
        #: hold back what a read_committed consumer may see
        self.replies_stall_s = replies_stall_s
        self._consumer_factory = consumer_factory
        #: replies partition -> the offset after the last record the reply consumer delivered
        self._reply_pos: dict[int, int] = {}
        #: replies partition -> when the reply consumer last delivered a record of it, or was
        #: (re)assigned (monotonic)
        self._reply_seen: dict[int, float] = {}
        #: the high watermarks seen when the reply consumer was last replaced
        self._replaced_at_highs: dict[int, int] | None = None
        self._behind: dict[int, tuple[float, int]] = {}  # partition -> (first seen behind, high then)
        self._next_reply_check = 0.0
        #: how many times the reply consumer was replaced
        self.reply_consumer_replacements = 0
        #: a command whose reply has not come after this many seconds is produced again, with the
        #: same request ID (so it is applied once), then after twice as long, up to once a minute;
        #: 0: never (one wait, as before the resend existed)
        self.resend_after_s = resend_after_s
        #: (workflow_id, request_id) -> the encoded command, while its reply is awaited
        self._sent: dict[tuple[str, str], bytes] = {}
        #: the awaited commands Kafka has acknowledged (a wait that ends without a reply for one of
        #: them is the engine's silence, ``NoReplyError``, not the broker's)
        self._delivered: set[tuple[str, str]] = set()
        #: spans for the commands sent on a caller's behalf (``topics.tracing``)
        self.tracer = Tracer("client", tracer_provider)
        self.topics = Catalogue(config)
        #: the public topics' codecs: the registry's wire format when one is configured (decision 0056)
        self.command_codec, self.history_codec, self.reply_codec = serde.public_codecs(self.topics)
        #: the history reads (``read_history``), read your writes through the replies' history seqs
        self.histories = RunHistories(config, self.topics.history, lambda: self.partitions, self.history_codec)
        conf = config.producer(**{"linger.ms": config.client_linger_ms})
        self._producer_conf = conf
        #: the largest command this client can produce (librdkafka's default unless configured)
        self.message_max_bytes = int(conf.get("message.max.bytes", 1_000_000))
        #: replaced when it stops delivering while the broker answers (``replacing_producer``)
        self._producer = ReplacingProducer(conf, stall_s=producer_stall_s, factory=producer_factory)
        #: (workflow_id, request_id) -> future of the reply; the same key for two workflows is
        #: two requests
        self._pending: dict[tuple[str, str], cf.Future[Any]] = {}
        #: request ID (the reply's key) -> how many pending futures wait for it
        self._waiting: dict[bytes, int] = {}
        #: the reader of workflow streams (``follow_stream``), made on first use
        self._streams: StreamHub | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._partitions: int | None = None
        #: the replies topic's partitions (checked at connect), read from their end once a reply is awaited
        self._reply_partitions: list[int] = []
        self._connect_timeout = connect_timeout
        self._replies: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._replies_lock = threading.Lock()
        self._check_topics(connect_timeout)
        self._poller = threading.Thread(target=self._poll_producer, name="kadence-producer", daemon=True)
        self._poller.start()

    # -- setup ---------------------------------------------------------------------------------

    def _check_topics(self, timeout: float) -> None:
        try:
            md = metadata(self._producer, self._producer_conf, timeout=timeout)
        except KafkaException as exc:
            raise BrokerUnavailableError(f"Kafka at {self.config.bootstrap} did not answer: {exc}") from exc
        tmd = md.topics.get(self.topics.replies)
        cmd_md = md.topics.get(self.topics.commands)
        if tmd is None or tmd.error is not None or not tmd.partitions or cmd_md is None or cmd_md.error is not None:
            # the listing leaves out what the principal may not describe: ask the catalogue, which
            # tells a missing ACL from a missing topic
            self.topics.require([self.topics.replies, self.topics.commands], timeout=timeout)
            raise KadenceError(
                f"topics {self.topics.replies} and {self.topics.commands} are not ready: run `kadence topics apply` "
                f"for namespace {self.config.namespace!r}"
            )
        self._reply_partitions = sorted(tmd.partitions)
        self._partitions = len(cmd_md.partitions)

    def ensure_replies(self) -> None:
        """Start reading the replies topic from its current end (once; before the first command
        that expects a reply is produced)."""
        if self._thread is not None:
            return
        with self._replies_lock:
            if self._thread is not None:
                return
            consumer = self._consumer_factory(self._reply_consumer_conf())
            try:
                self._assign_replies(consumer, self._connect_timeout)
            except BaseException:
                consumer.close()
                raise
            self._replies = consumer
            thread = threading.Thread(target=self._reply_loop, name="kadence-replies", daemon=True)
            thread.start()
            self._thread = thread

    def _assign_replies(self, consumer: Consumer, timeout: float) -> None:
        """Assign every replies partition (checked at connect) at its current end."""
        tps = []
        deadline = time.monotonic() + timeout
        for p in self._reply_partitions:
            while True:
                try:
                    _low, high = consumer.get_watermark_offsets(TopicPartition(self.topics.replies, p), timeout=timeout)
                    break
                except KafkaException as exc:  # leader moving or not elected yet: retry until deadline
                    if not exc.args[0].retriable() and exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION:
                        raise BrokerUnavailableError(f"cannot read {self.topics.replies}: {exc}") from exc
                    if time.monotonic() > deadline:
                        raise BrokerUnavailableError(f"cannot read {self.topics.replies}: {exc}") from exc
                    time.sleep(0.1)
            tps.append(TopicPartition(self.topics.replies, p, high))
        consumer.assign(tps)
        self._reply_pos = {tp.partition: tp.offset for tp in tps}
        now = time.monotonic()
        self._reply_seen = {tp.partition: now for tp in tps}

    def _reply_consumer_conf(self) -> dict[str, Any]:
        return self.config.waiting_consumer(None)

    @property
    def partitions(self) -> int:
        assert self._partitions is not None
        return self._partitions

    # -- background threads --------------------------------------------------------------------

    @property
    def _live_replies(self) -> Consumer:
        """The reply consumer (made before the threads that read it start)."""
        assert self._replies is not None, "the client is not connected"
        return self._replies

    def _reply_loop(self) -> None:
        codec = self.reply_codec
        waiting = self._waiting
        pos = self._reply_pos
        while not self._closed.is_set():
            try:
                msgs = poll_ready(self._live_replies, 500, 0.2)
            except KafkaException as exc:  # pragma: no cover - logged, loop continues
                log.warning("reply consumer error: %s", exc)
                continue
            now, seen = time.monotonic(), self._reply_seen
            for msg in msgs:
                if msg.error():
                    continue
                part = msg.partition()
                pos[part] = msg.offset() + 1
                seen[part] = now
                if msg.key() not in waiting:  # another client's reply: not decoded
                    continue
                try:
                    reply = codec.decode(msg.value())
                except KadenceError:
                    log.warning("undecodable reply at %s[%d]@%d", msg.topic(), msg.partition(), msg.offset())
                    continue
                with self._lock:
                    fut = self._forget(reply["workflow_id"], reply["request_id"])
                    self.histories.saw(reply["workflow_id"], reply.get("run_id"), reply.get("history_seq"))
                if fut is not None and not fut.done():
                    fut.set_result(reply)
            if self.replies_stall_s > 0 and waiting:
                self._check_replies()

    def _check_replies(self) -> None:
        """Replace the reply consumer when it stopped fetching (run by the reply thread while a
        reply is awaited): some partition delivered nothing for ``replies_stall_s`` while records
        the broker already held ``replies_stall_s`` ago are still past its position there (at
        least two offsets: one is the marker that ends a transaction, which is never delivered),
        and the watermarks moved since the last replacement (otherwise a new consumer would find
        nothing new either). A record written just now is not a stall: a quiet partition that
        receives a reply is behind for the moment of one fetch. A replacement that was not needed
        costs one consumer's setup, and nothing is skipped: the new consumer starts where the old
        one stood."""
        now = time.monotonic()
        if now < self._next_reply_check:
            return
        self._next_reply_check = now + min(5.0, self.replies_stall_s / 3)
        quiet = [p for p in self._reply_partitions if now - self._reply_seen.get(p, now) >= self.replies_stall_s]
        behind = self._behind
        for p in list(behind):
            if p not in quiet:  # it delivered since: not deaf
                del behind[p]
        if not quiet:
            return
        consumer, topic = self._live_replies, self.topics.replies
        highs = {}
        try:
            for p in quiet:
                if self._closed.is_set():  # close() waits for this thread before it closes the consumer
                    return
                highs[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2.0)[1]
        except (KafkaException, RuntimeError) as exc:  # the broker does not answer (a new consumer would
            log.debug("reading the watermarks of %s: %s", topic, exc)  # not help), or the client closed
            return
        stuck = {}
        for p in quiet:
            pos = self._reply_pos[p]
            if highs[p] - pos < 2:
                behind.pop(p, None)
                continue
            since, high_then = behind.setdefault(p, (now, highs[p]))
            if pos >= high_then - 1:  # what was there then is read: these records are new
                behind[p] = (now, highs[p])
            elif now - since >= self.replies_stall_s:
                stuck[p] = highs[p] - pos
        if not stuck or highs == self._replaced_at_highs:
            return
        log.warning(
            "the reply consumer delivered nothing for %.0f s while %s holds %d records past it "
            "(partitions %s); replacing it at the same positions",
            self.replies_stall_s,
            topic,
            sum(stuck.values()),
            sorted(stuck),
        )
        fresh = self._consumer_factory(self._reply_consumer_conf())
        try:
            fresh.assign([TopicPartition(topic, p, self._reply_pos[p]) for p in self._reply_partitions])
        except KafkaException as exc:
            log.warning("assigning the new reply consumer failed: %s", exc)
            _close_quietly(fresh)
            return
        with self._replies_lock:
            self._replies = fresh
        self._replaced_at_highs = highs
        self._behind = {}
        now = time.monotonic()
        self._reply_seen = {p: now for p in self._reply_partitions}
        self.reply_consumer_replacements += 1
        # closing a wedged consumer can block: not on the reply thread
        threading.Thread(target=_close_quietly, args=(consumer,), name="kadence-replies-close", daemon=True).start()

    def _forget(self, workflow_id: str, request_id: str) -> cf.Future[Any] | None:
        """Drop a pending request (call with ``_lock`` held); returns its future, if it was pending."""
        fut = self._pending.pop((workflow_id, request_id), None)
        self._sent.pop((workflow_id, request_id), None)
        self._delivered.discard((workflow_id, request_id))
        if fut is not None:
            key = request_id.encode()
            left = self._waiting.get(key, 0) - 1
            if left > 0:
                self._waiting[key] = left
            else:
                self._waiting.pop(key, None)
        return fut

    def _poll_producer(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)
            try:
                self._producer.watch()
            except Exception:
                log.exception("checking the producer failed")

    # -- operations ----------------------------------------------------------------------------

    def send(
        self,
        workflow_id: str,
        body_type: str,
        body: Mapping[str, Any],
        *,
        request_id: str,
        run_id: str | None = None,
        expect_reply: bool = True,
        trace: TraceRef | FromCaller | None = FROM_CALLER,
        event_id: str | None = None,
        deferred: bool = False,
    ) -> cf.Future[Any]:
        """Produce one command; the future resolves with its ``Reply`` dict.

        ``trace``: the command's trace context; by default a ``kadence.send`` span, child of
        the caller's current span (a worker passes its task's context, or None: untraced).
        ``event_id``: the command's (default: a new one; ``records.start_run_id``).
        ``deferred``: the command rides on another one just sent (the result request a start
        carries, ``StartWorkflow.result_request_id``): its reply is awaited and, when none comes,
        the command is produced as any unanswered one is, but it is not produced now."""
        fut: cf.Future[Any] = cf.Future()
        if trace is FROM_CALLER:
            trace = self.tracer.send_span(f"kadence.send {body_type}", {"kadence.workflow_id": workflow_id})
        record = command(
            workflow_id,
            body_type,
            body,
            request_id=request_id,
            run_id=run_id,
            trace_id=trace[0] if trace else None,
            span_id=trace[1] if trace else None,
            event_id=event_id,
        )
        value = self.command_codec.encode(record)
        if expect_reply:
            self.ensure_replies()
            with self._lock:
                existing = self._pending.get((workflow_id, request_id))
                if existing is not None:
                    fut = existing
                else:
                    self._pending[(workflow_id, request_id)] = fut
                    key = request_id.encode()
                    self._waiting[key] = self._waiting.get(key, 0) + 1

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                with self._lock:
                    self._forget(workflow_id, request_id)
                if not fut.done():
                    fut.set_exception(BrokerUnavailableError(f"command not accepted by Kafka: {err.str()}"))
            elif not expect_reply:
                if not fut.done():
                    fut.set_result(None)
            else:
                with self._lock:
                    if (workflow_id, request_id) in self._pending:  # still awaited: Kafka has it
                        self._delivered.add((workflow_id, request_id))

        if deferred:
            with self._lock:
                if (workflow_id, request_id) in self._pending:
                    self._delivered.add((workflow_id, request_id))
                    if self.resend_after_s > 0:
                        self._sent[(workflow_id, request_id)] = value
            return fut
        try:
            self.produce_raw(self.topics.commands, workflow_id.encode(), value, on_delivery)
        except Exception:
            if expect_reply:
                with self._lock:
                    self._forget(workflow_id, request_id)
            raise
        if expect_reply and self.resend_after_s > 0:
            with self._lock:
                if (workflow_id, request_id) in self._pending:  # not answered already
                    self._sent[(workflow_id, request_id)] = value
        return fut

    def expect_reply(self, workflow_id: str, request_id: str) -> cf.Future[Any]:
        """A future for the reply to a command that is produced some other way (a worker's task
        completion that asks for eager activities goes through its outbox or its activity
        reporter); call before that command is produced, and ``abandon`` it if no reply comes."""
        self.ensure_replies()
        fut: cf.Future[Any] = cf.Future()
        with self._lock:
            self._pending[(workflow_id, request_id)] = fut
            key = request_id.encode()
            self._waiting[key] = self._waiting.get(key, 0) + 1
        return fut

    def produce_raw(self, topic: str, key: bytes, value: bytes, on_delivery: Callable[..., None] | None = None) -> None:
        try:
            produce_waiting(self._producer, topic, value, key, on_delivery=on_delivery)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                limit = self.message_max_bytes
                raise PayloadTooLargeError(
                    f"the command is {len(value) + len(key)} bytes, over Kafka's message size limit of "
                    f"{limit} bytes (message.max.bytes); nothing was written",
                    size=len(value) + len(key),
                    limit=limit,
                ) from exc
            raise

    async def read_limits(self, keys: list[str]) -> list[dict[str, Any]]:
        """``concurrency_reader.read_limits`` of ``keys`` (from their owning partitions alone),
        or nothing when the broker does not answer: for describe's queue positions, which must
        not make describe fail."""
        try:
            return await asyncio.to_thread(read_limits, self.config, keys)
        except KadenceError as exc:
            log.warning("the concurrency limits %s could not be read: %s", keys, exc)
            return []

    async def request(
        self,
        workflow_id: str,
        body_type: str,
        body: Mapping[str, Any],
        *,
        request_id: str,
        run_id: str | None = None,
        timeout: float | None = 30.0,
        event_id: str | None = None,
    ) -> dict[str, Any]:
        fut = self.send(workflow_id, body_type, body, request_id=request_id, run_id=run_id, event_id=event_id)
        return await self.wait(workflow_id, body_type, request_id, fut, timeout)

    async def wait(
        self, workflow_id: str, body_type: str, request_id: str, fut: cf.Future[Any], timeout: float | None
    ) -> dict[str, Any]:
        """The reply ``fut`` (from ``send``) resolves with. After ``timeout`` s the request is
        abandoned: ``NoReplyError`` if Kafka acknowledged the command (the engine did not answer),
        ``BrokerUnavailableError`` if it never did (the broker did not take it)."""
        started = time.monotonic()

        def no_reply() -> BrokerUnavailableError:
            with self._lock:
                delivered = (workflow_id, request_id) in self._delivered
                self._forget(workflow_id, request_id)
            waited = f"waited {time.monotonic() - started:.1f}s"
            if not delivered:  # Kafka never acknowledged it: the broker is the problem
                return BrokerUnavailableError(
                    f"no reply to {body_type} for workflow {workflow_id!r} within {timeout}s: Kafka did not "
                    f"acknowledge the command ({waited})"
                )
            why = (
                "the run is still open, or no history processor is running"
                if body_type == "AwaitWorkflowResult"
                else "is the history processor running?"
            )
            return NoReplyError(
                f"no reply to {body_type} for workflow {workflow_id!r} within {timeout}s: Kafka "
                f"has the command, the engine did not answer ({waited}; {why})"
            )

        deadline = None if timeout is None else started + timeout
        reply_fut = asyncio.wrap_future(fut)
        # resending off: one slice, the whole timeout
        interval = self.resend_after_s if self.resend_after_s > 0 else math.inf
        while True:
            step: float | None = interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic()))
            if step == math.inf:
                step = None
            try:
                # shielded: a slice that ends must not cancel the reply's future
                reply = await asyncio.wait_for(asyncio.shield(reply_fut), step)
                break
            except TimeoutError as exc:
                if deadline is not None and time.monotonic() >= deadline:
                    raise no_reply() from exc
                self._resend(workflow_id, request_id, body_type, time.monotonic() - started)
                interval = min(interval * 2, 60.0)
            except asyncio.CancelledError:  # the caller gave up: nothing to send again for it
                with self._lock:
                    self._sent.pop((workflow_id, request_id), None)
                raise
        return self._checked(reply)

    @staticmethod
    def _checked(reply: dict[str, Any]) -> dict[str, Any]:
        if reply["status"] == "wrong_partition":  # the engine created nothing
            raise WrongPartitionError(reply["message"])
        if reply["status"] == "quarantined":  # applied nothing, dead-lettered
            raise WorkflowQuarantinedError(reply["message"], workflow_id=reply["workflow_id"])
        return reply

    def _resend(self, workflow_id: str, request_id: str, body_type: str, waited_s: float) -> None:
        """Produce an awaited command again, byte for byte: its request ID makes the processor
        apply it once and answer the copy from what it did (a duplicate start gets the run it
        started). A command can be lost between a producer and the log without an error: in a
        soak and a reproduction on a fresh broker, the first commands for one partition never
        reached it, while later ones did and no delivery failed (docs/fault-testing.md). A
        slow processor gets one extra command per wait, at growing intervals."""
        with self._lock:
            value = self._sent.get((workflow_id, request_id))
        if value is None:  # answered or abandoned meanwhile
            return
        # a result request waits for the run to close: no reply for minutes is normal there
        level = logging.DEBUG if body_type == "AwaitWorkflowResult" else logging.WARNING
        log.log(
            level,
            "no reply to %s for workflow %s after %.0f s; producing it again (request ID %s: applied once)",
            body_type,
            workflow_id,
            waited_s,
            request_id,
        )
        try:
            self.produce_raw(self.topics.commands, workflow_id.encode(), value)
        except KafkaException as exc:  # the next slice tries again
            log.warning("producing %s for workflow %s again failed: %s", body_type, workflow_id, exc)

    def abandon(self, workflow_id: str, request_id: str) -> None:
        """Stop waiting for a request's reply (the command itself stays sent)."""
        with self._lock:
            self._forget(workflow_id, request_id)

    def read_history(self, workflow_id: str, run_id: str, *, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Every history event of one run, in order (copies), read incrementally and cached, read
        your writes (``kadence.topics.run_histories``). Tombstones delete their event: an archived
        run reads as empty here (``kadence.topics.archive.read_history`` falls back to the archive)."""
        return self.histories.read(workflow_id, run_id, timeout)

    async def history(self, workflow_id: str, run_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        """(run_id, events) of a run; the current run when ``run_id`` is None."""
        if run_id is None:
            from .protocol import check_found
            from .records import new_id

            reply = await self.request(workflow_id, "AwaitWorkflowResult", {"wait": False}, request_id=new_id())
            check_found(reply, workflow_id)
            run_id = reply["run_id"]
        events = await asyncio.get_running_loop().run_in_executor(None, self.read_history, workflow_id, run_id)
        return run_id, events

    async def history_through(self, workflow_id: str, run_id: str, seq: int) -> list[dict[str, Any]]:
        """The run's events, read at least through ``seq`` (events known committed: a workflow
        task sent without its events was written in their transaction); ``NoReplyError`` when
        the broker does not show them within ``SEQ_WAIT_S``."""
        self.histories.saw(workflow_id, run_id, seq)
        events = await asyncio.get_running_loop().run_in_executor(None, self.read_history, workflow_id, run_id)
        if seq and (not events or events[-1]["seq"] < seq):
            reached = events[-1]["seq"] if events else 0
            raise NoReplyError(
                f"the history of workflow {workflow_id!r} run {run_id!r} reads to event {reached}, short of {seq}"
            )
        return events

    def follow_stream(
        self,
        workflow_id: str,
        *,
        stream: str | None,
        after: int | None = None,
        since_ms: int | None = None,
        accept: Callable[[StreamEntry], bool] = lambda _e: True,
    ) -> StreamReader:
        """A reader of a workflow's stream records (``StreamHub.follow``), through this client's
        one stream consumer (made on first use)."""
        with self._lock:
            if self._streams is None:
                self._streams = StreamHub(self.config, Catalogue(self.config).streams)
            hub = self._streams
        return hub.follow(workflow_id, stream=stream, after=after, since_ms=since_ms, accept=accept)

    def flush(self, timeout: float = 10.0) -> None:
        self._producer.flush(timeout)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._producer.flush(5)
        self._closed.set()
        self.histories.close()
        if self._streams is not None:
            self._streams.close()
        with self._replies_lock:
            thread, consumer = self._thread, self._replies
        if thread is not None:
            # a poll returns within 0.2 s; a watermark read of _check_replies within 2 s
            thread.join(5)
        self._poller.join(2)
        if consumer is not None:
            try:
                consumer.close()
            except RuntimeError:
                pass
        with self._lock:
            for fut in self._pending.values():
                if not fut.done():
                    fut.cancel()
            self._pending.clear()
            self._waiting.clear()
