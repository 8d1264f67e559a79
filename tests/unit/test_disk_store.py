"""The RocksDB shard store behaves exactly as the memory store (the processor's default is disk)."""

from __future__ import annotations

import random

import pytest

from kadence.processors.disk_store import DiskShardStore
from kadence.processors.effects import BatchView
from kadence.processors.store import MemoryShardStore
from kadence.schemas import CURRENT_VERSION, load_schema_set
from kadence.topics import serde
from tests.support.fastavro_reference import parse_set, write


def _event(wf: str, run: str, seq: int, request_id: str | None = None) -> dict:
    return {
        "event_id": f"e{seq}",
        "aggregate_key": wf,
        "run_id": run,
        "seq": seq,
        "timestamp_ms": 1_700_000_000_000 + seq,
        "trace_id": None,
        "request_id": request_id,
        "attributes": ("WorkflowSignaled", {"signal_name": "s", "input": b"{}", "identity": "t"}),
    }


def _state(wf: str, run: str, status: str = "running") -> dict:
    st = {
        "workflow_id": wf,
        "run_id": run,
        "workflow_type": "T",
        "task_queue": "q",
        "status": status,
        "start_time_ms": 1,
        "close_time_ms": None,
        "next_seq": 1,
        "wt_scheduled_seq": None,
        "wt_attempt": 0,
        "wt_last_completed_seq": 0,
        "wt_needed": False,
        "wt_failure": None,
        "wt_failure_cause": None,
        "pending_activities": [],
        "recent_requests": [],
        "result": None,
        "failure": None,
        "result_waiters": [],
        "pending_timers": [],
        "cancel_requested": False,
        "signals_seen": 0,
        "continued_run_id": None,
        "history_warned": False,
        "run_timeout_ms": None,
        "search_attributes": {},
        "execution_deadline_ms": None,
        "pending_children": [],
        "parent_workflow_id": None,
        "parent_run_id": None,
        "parent_initiated_seq": 0,
        "build_id": None,
    }
    return serde.decode("WorkflowState", serde.encode("WorkflowState", st))


def _wire(events: list[dict]) -> list[dict]:
    """As read back from bytes (the disk store's form: ``schema_version`` says who wrote it)."""
    return [serde.decode("HistoryEvent", serde.encode("HistoryEvent", e)) for e in events]


def _task_bytes(store, wf: str, run: str, since: int, upto: int | None) -> bytes:
    """A workflow task of the events a batch view hands over (the disk store's stay encoded),
    with one more event staged in the batch, as the processor writes it."""
    view = BatchView(store)
    staged = _event(wf, run, 10_000, "staged")
    view.append(wf, staged)
    events = view.task_events(wf, run, since, upto)
    return serde.encode(
        "WorkflowTask",
        {
            "workflow_id": wf,
            "run_id": run,
            "workflow_type": "T",
            "task_queue": "q",
            "scheduled_seq": 1,
            "attempt": 1,
            "full_history": since == 0,
            "events": events,
            "trace_id": None,
            "query": None,
            "build_id": None,
        },
    )


def test_an_event_stored_by_an_older_schema_version_is_handed_over_decoded(stores):
    _memory, disk = stores
    event = {k: v for k, v in _event("w", "r", 1).items() if k not in ("schema_version", "span_id")}
    old = write(parse_set(load_schema_set(CURRENT_VERSION - 1)), "HistoryEvent", event, CURRENT_VERSION - 1)
    disk.append_history("w", "r", [_event("w", "r", 1)], [old])
    [event] = disk.get_history_encoded("w", "r")
    assert isinstance(event, dict) and event["seq"] == 1


@pytest.fixture
def stores(tmp_path):
    disk = DiskShardStore(3, tmp_path / "p3", cache_size=4)  # tiny cache: most reads hit RocksDB
    yield MemoryShardStore(3), disk
    disk.close()
    assert not (tmp_path / "p3").exists(), "close() removes the database directory"


def test_random_operations_agree(stores):
    memory, disk = stores
    rng = random.Random(7)
    wfs = [f"wf-{i}" for i in range(12)] + ["wf-1x", "wf-\u00e9"]  # a prefix of another ID, non-ASCII
    runs: dict[str, str] = {}
    seqs: dict[str, int] = {}
    for step in range(3000):
        wf = rng.choice(wfs)
        op = rng.random()
        if op < 0.35:
            if wf not in runs or rng.random() < 0.1:
                runs[wf], seqs[wf] = f"run-{step}", 0
            n = rng.randint(1, 4)
            events = [
                _event(wf, runs[wf], seqs[wf] + i + 1, f"req-{step}-{i}" if rng.random() < 0.3 else None)
                for i in range(n)
            ]
            seqs[wf] += n
            for s in (memory, disk):
                s.append_history(wf, runs[wf], [dict(e) for e in events])
        elif op < 0.55:
            st = _state(wf, runs.get(wf, "none"), rng.choice(["running", "completed"]))
            for s in (memory, disk):
                s.put_state(wf, dict(st))
        elif op < 0.6:
            for s in (memory, disk):
                s.drop_history(wf)
            runs.pop(wf, None)
        elif op < 0.63:
            for s in (memory, disk):
                s.delete_state(wf)
            runs.pop(wf, None)
        run = runs.get(wf, "none")
        since = rng.randint(0, max(0, seqs.get(wf, 0)))
        assert disk.get_history(wf, run, since) == _wire(memory.get_history(wf, run, since)), (step, wf)
        assert disk.get_state(wf) == memory.get_state(wf), (step, wf)
        upto = rng.choice([None, since + rng.randint(0, 3)])
        assert _task_bytes(disk, wf, run, since, upto) == _task_bytes(memory, wf, run, since, upto), (step, wf)
        rid = f"req-{rng.randint(0, step)}-0"
        assert disk.request_seen(wf, run, rid) == memory.request_seen(wf, run, rid), (step, wf, rid)
        assert len(disk) == len(memory) and disk.open_runs() == memory.open_runs(), step


def test_history_of_another_run_is_not_returned(stores):
    _memory, disk = stores
    disk.append_history("w", "r1", [_event("w", "r1", 1, "a"), _event("w", "r1", 2)])
    disk.append_history("w", "r2", [_event("w", "r2", 1)])  # a new run replaces the old one's events
    assert [e["seq"] for e in disk.get_history("w", "r2")] == [1]
    assert disk.get_history("w", "r1") == []
    assert not disk.request_seen("w", "r2", "a")
    assert disk.open_runs() == 1


def test_dropping_a_history_deletes_its_keys_and_only_those(stores):
    _memory, disk = stores
    for wf in ("w1", "w10", "w2"):  # "w1" is a byte prefix of "w10": the separator keeps them apart
        disk.append_history(wf, "r", [_event(wf, "r", s, f"req-{wf}-{s}") for s in (1, 2, 3)])
    disk.drop_history("w1")
    assert disk.get_history("w1", "r") == []
    assert not disk.request_seen("w1", "r", "req-w1-2")
    assert [e["seq"] for e in disk.get_history("w10", "r")] == [1, 2, 3]
    assert [e["seq"] for e in disk.get_history("w2", "r", since=1)] == [2, 3]
    assert disk.request_seen("w10", "r", "req-w10-3")
    left = [bytes(k) for k in disk._db.keys()]
    assert not [k for k in left if k[1:].startswith(b"w1\x00")], left
    assert len([k for k in left if k[:1] == b"h"]) == 6
    assert disk.open_runs() == 2


@pytest.mark.parametrize("store_class", [MemoryShardStore, DiskShardStore])
def test_both_stores_implement_the_declared_interface(store_class):
    """One declared interface (``ShardStore``) instead of telling the stores apart by attribute:
    each method of the protocol exists on both stores with the protocol's parameters."""
    import inspect

    from kadence.processors.shard_store import ShardStore

    declared = {
        name: inspect.signature(member)
        for name, member in vars(ShardStore).items()
        if callable(member) and (not name.startswith("_") or name == "__len__")
    }
    assert {"put_state", "append_history", "get_history_encoded", "close"} <= set(declared)
    for name, signature in declared.items():
        implemented = inspect.signature(getattr(store_class, name))
        assert list(implemented.parameters) == list(signature.parameters), (store_class.__name__, name)
        for pname, param in signature.parameters.items():
            assert implemented.parameters[pname].default == param.default, (store_class.__name__, name, pname)
