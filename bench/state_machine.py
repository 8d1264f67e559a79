"""``python -m bench.state_machine [N] [ROUNDS]``: the state machine's own time per command.

The commands of N three-activity workflows (start, workflow task completions, activity
results; recorded once by running the workflows in memory, as ``bench.codecs`` does) are
replayed through ``transition`` on a fresh in-memory shard, ROUNDS times; it prints the best
round's microseconds per command and per workflow. No broker, no codecs: the code between a
decoded command and its outbox, which Kafka's round trips hide in ``make bench``'s figures."""

from __future__ import annotations

import sys
import time

from kadence.processors.effects import BatchView, Outbox
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.topics.records import now_ms

from .codecs import _records


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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 2000
    rounds = int(args[1]) if len(args) > 1 else 7
    commands = _records(n)["Command"]
    best = min(replay(commands) for _ in range(rounds))
    print(
        f"state machine: {len(commands)} commands of {n} three-activity workflows, best of {rounds}: "
        f"{best / len(commands) * 1e6:.2f} us per command, {best / n * 1e6:.1f} us per workflow"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
