"""``python -m bench.record_types``: the workflow state as a plain dict (its TypedDict) against a
slotted dataclass of the same fields: decode, the batch view's copy, encode, field reads.
Decision 0047 quotes this run. No broker needed."""

from __future__ import annotations

import copy
import dataclasses
import timeit

from kadence.topics import serde

N = 100_000


def _per_call_us(stmt: str, env: dict) -> float:
    return min(timeit.repeat(stmt, globals=env, number=N, repeat=5)) / N * 1e6


def main() -> None:
    base = {
        "workflow_id": "wf-1",
        "run_id": "r",
        "workflow_type": "T",
        "task_queue": "q",
        "status": "running",
        "start_time_ms": 1,
        "next_seq": 12,
    }
    codec = serde.codec("WorkflowState")
    raw = codec.encode(base)
    st = codec.decode(raw)
    state_class = dataclasses.make_dataclass("State", list(st), slots=True)
    env = {
        "codec": codec,
        "raw": raw,
        "st": st,
        "obj": state_class(**st),
        "State": state_class,
        "copy": copy,
        "dataclasses": dataclasses,
    }
    reads = "st['status']; st['run_id']; st['next_seq']; st['paused']; st['wt_needed']"
    rows = [
        ("decode", "codec.decode(raw)", "State(**codec.decode(raw))"),
        ("copy", "st.copy()", "copy.copy(obj)"),
        ("encode", "codec.encode(st)", "codec.encode(dataclasses.asdict(obj))"),
        ("read 5 fields", reads, "obj.status; obj.run_id; obj.next_seq; obj.paused; obj.wt_needed"),
    ]
    print(f"WorkflowState ({len(st)} fields), best of 5 x {N:,}, microseconds per call")
    print(f"{'operation':<15}{'dict':>10}{'dataclass':>12}{'ratio':>8}")
    for name, as_dict, as_dataclass in rows:
        d, c = _per_call_us(as_dict, env), _per_call_us(as_dataclass, env)
        print(f"{name:<15}{d:>10.3f}{c:>12.3f}{c / d:>8.2f}")


if __name__ == "__main__":
    main()
