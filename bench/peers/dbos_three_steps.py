"""DBOS's side of the peer comparison (issue 45): run inside the peers' own virtualenv (DBOS is
not one of Kadence's dependencies; ``bench.peers.setup`` makes it), against the PostgreSQL that
``bench.peers.postgres`` starts. A workflow of three steps (each returns its input plus one, the
counterpart of three local activities), one in flight, for ``--seconds`` after ``--warmup``; prints
one JSON line: the start -> result latencies in ms of the measured window and its workflows.

Usage: ``python dbos_three_steps.py --database-url postgresql://... --seconds 10 --warmup 2``"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from dbos import DBOS, SetWorkflowID


@DBOS.step()
def add_one(x: int) -> int:
    return x + 1


@DBOS.workflow()
def three_steps(x: int) -> int:
    for _ in range(3):
        x = add_one(x)
    return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    args = ap.parse_args()
    DBOS(config={"name": "kadence-peer-bench", "system_database_url": args.database_url, "log_level": "WARNING"})
    DBOS.launch()
    try:
        t_warm = time.monotonic() + args.warmup
        t_end = t_warm + args.seconds
        latencies: list[float] = []
        print(json.dumps({"ready": True}), flush=True)
        while (now := time.monotonic()) < t_end:
            with SetWorkflowID(str(uuid.uuid4())):  # as Kadence's: each workflow its own ID
                assert three_steps(1) == 4
            if now >= t_warm:
                latencies.append((time.monotonic() - now) * 1000)
        print(json.dumps({"latencies_ms": latencies, "seconds": args.seconds}), flush=True)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main()
