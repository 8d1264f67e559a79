"""``python -m bench.state_machine [N] [ROUNDS] [--traced]``: the state machine's own time per command.

The commands of N three-activity workflows (start, workflow task completions, activity
results; recorded once by running the workflows in memory, as ``bench.codecs`` does) are
replayed through ``transition`` on a fresh in-memory shard, ROUNDS times; it prints the best
round's microseconds per command and per workflow. No broker, no codecs: the code between a
decoded command and its outbox, which Kafka's round trips hide in ``make bench``'s figures.

``--traced`` (issue 21: what tracing costs the processor) replays them twice more, alternating,
with the codecs: decoding the command and encoding what it wrote (events, tasks, states), once
untraced and once with every command carrying a trace context, through the processor's
``traced_transition`` and the engine's span pipeline (recording and encoding each span; nothing
is sent). It prints both and the difference per workflow."""

from __future__ import annotations

import sys
import time
from typing import Any

from kadence.processors.effects import BatchView, Outbox
from kadence.processors.history_processor import traced_transition
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.topics import serde
from kadence.topics.records import now_ms
from kadence.topics.span_export import engine_tracer_provider
from kadence.topics.tracing import Tracer, record_ref

from .codecs import _records

#: a parent context as a traced client's send span leaves it in the command
TRACE_REF = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


def replay(commands: list[dict]) -> float:
    """Seconds to run ``commands`` through ``transition``, one batch each, on a fresh shard."""
    store = MemoryShardStore(0)
    ts = now_ms()
    elapsed = 0.0
    for cmd in commands:
        t0 = time.perf_counter()
        view, out = BatchView(store), Outbox()
        transition(cmd, view, out, ts)
        view.commit_into(store)
        elapsed += time.perf_counter() - t0
    return elapsed


def replay_encoded(encoded: list[bytes], tracer: Tracer | None) -> float:
    """Seconds to decode each command, run it (through ``traced_transition`` when ``tracer``
    is given) and encode what it wrote."""
    store = MemoryShardStore(0)
    ts = now_ms()
    elapsed = 0.0
    for raw in encoded:
        t0 = time.perf_counter()
        cmd: dict[str, Any] = serde.decode("Command", raw)
        view, out = BatchView(store), Outbox()
        if tracer is None:
            transition(cmd, view, out, ts)
        else:
            traced_transition(tracer, cmd, view, out, ts, out.mark(), record_ref(cmd))
        for _wf, event in out.events:
            serde.encode("HistoryEvent", event)
        for kind, _queue, task in out.tasks:
            serde.encode("WorkflowTask" if kind == "workflow" else "ActivityTask", task)
        for state in view.states.values():
            if state is not None:
                serde.encode("WorkflowState", state)
        view.commit_into(store)
        elapsed += time.perf_counter() - t0
    return elapsed


def traced(n: int, rounds: int, commands: list[dict]) -> None:
    # a pipeline that never sends within the probe (an hour's delay, room for every span; at
    # exit one post to a closed port fails at once)
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "0.1",
        "OTEL_BSP_MAX_QUEUE_SIZE": str(len(commands) * rounds + 1),
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(len(commands) * rounds + 1),
        "OTEL_BSP_SCHEDULE_DELAY": "3600000",
    }
    provider = engine_tracer_provider("bench-state-machine", env)
    tracer = Tracer("processor", provider)
    plain = [serde.encode("Command", c) for c in commands]
    with_context = [serde.encode("Command", {**c, "trace_id": TRACE_REF[0], "span_id": TRACE_REF[1]}) for c in commands]
    off, on = [], []
    for _ in range(rounds):
        off.append(replay_encoded(plain, None))
        on.append(replay_encoded(with_context, tracer))
    best_off, best_on = min(off) / n * 1e6, min(on) / n * 1e6
    print(
        f"with codecs, best of {rounds}: untraced {best_off:.1f} us per workflow, traced {best_on:.1f} "
        f"(+{best_on - best_off:.1f} us, {best_on / best_off:.3f}x)"
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    flags = {a for a in args if a.startswith("--")}
    args = [a for a in args if not a.startswith("--")]
    n = int(args[0]) if args else 2000
    rounds = int(args[1]) if len(args) > 1 else 7
    commands = _records(n)["Command"]
    best = min(replay(commands) for _ in range(rounds))
    print(
        f"state machine: {len(commands)} commands of {n} three-activity workflows, best of {rounds}: "
        f"{best / len(commands) * 1e6:.2f} us per command, {best / n * 1e6:.1f} us per workflow"
    )
    if "--traced" in flags:
        traced(n, rounds, commands)
    return 0


if __name__ == "__main__":
    sys.exit(main())
