"""``python -m bench.codecs [N]``: Avro encode/decode time per record type, Kadence's codecs
(the generated ones serde uses, and the closure codecs before them) against fastavro, in one run,
on the records of N three-activity workflows.

No broker needed: the workflows run through the state machine and the SDK's workflow instance in
memory (decisions 0027 and 0030 quote this run)."""

from __future__ import annotations

import io
import sys
import time
from collections import defaultdict

import fastavro

from kadence._instance import WorkflowInfo, WorkflowInstance
from kadence.processors.effects import BatchView, Outbox
from kadence.processors.state_machine import transition
from kadence.processors.store import MemoryShardStore
from kadence.schemas import CURRENT_VERSION
from kadence.topics import avro_binary, serde
from kadence.topics.payload import JsonConverter
from kadence.topics.records import command, now_ms

from .workloads import ThreeActivities


def _records(n: int) -> dict[str, list[dict]]:
    """Every record the engine and the worker encode while ``n`` workflows run to completion."""
    conv = JsonConverter()
    store, defn = MemoryShardStore(0), ThreeActivities.__kadence_workflow__
    recs: dict[str, list[dict]] = defaultdict(list)
    tasks: list = []
    instances: dict[str, WorkflowInstance] = {}

    def send(wf, body_type, body, request_id, run_id=None):
        cmd = serde.decode(
            "Command", serde.encode("Command", command(wf, body_type, body, request_id=request_id, run_id=run_id))
        )
        recs["Command"].append(cmd)
        view, out = BatchView(store), Outbox()
        transition(cmd, view, out, now_ms())
        view.commit_into(store)
        recs["HistoryEvent"] += [e for _, e in out.events]
        recs["WorkflowState"] += list(view.states.values())
        recs["Reply"] += out.replies
        for kind, _, task in out.tasks:
            recs["WorkflowTask" if kind == "workflow" else "ActivityTask"].append(task)
            tasks.append((kind, task))

    for i in range(n):
        send(
            f"wf-{i}",
            "StartWorkflow",
            {"workflow_type": defn.name, "task_queue": "q", "input": conv.to_bytes([i])},
            f"start-{i}",
        )
    while tasks:
        kind, task = tasks.pop(0)
        wf, run = task["workflow_id"], task["run_id"]
        if kind == "workflow":
            inst = instances.get(wf) or instances.setdefault(
                wf, WorkflowInstance(defn, WorkflowInfo(wf, run, defn.name, "q"), conv)
            )
            commands = inst.apply(task["events"], task["scheduled_seq"])
            send(
                wf,
                "RespondWorkflowTaskCompleted",
                {"scheduled_seq": task["scheduled_seq"], "commands": commands},
                f"wt-{wf}-{task['scheduled_seq']}",
                run,
            )
        else:
            result = conv.to_bytes(conv.from_bytes(task["input"])[0] + 1)
            send(
                wf,
                "RespondActivityTaskCompleted",
                {
                    "activity_id": task["activity_id"],
                    "attempt": task["attempt"],
                    "scheduled_seq": task["scheduled_seq"],
                    "result": result,
                },
                f"at-{wf}-{task['scheduled_seq']}",
                run,
            )
    return recs


def _qualified(value):
    """fastavro's form of a value: fully qualified union names."""
    if isinstance(value, tuple):
        return (value[0] if "." in value[0] else "kadence." + value[0], _qualified(value[1]))
    if isinstance(value, dict):
        return {k: _qualified(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_qualified(v) for v in value]
    return value


def _short(value):
    """What serde did after fastavro read a record: short union names."""
    if isinstance(value, tuple):
        return (value[0].rpartition(".")[2], _short(value[1]))
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value]
    return value


def fastavro_encode(record: str, value: dict) -> bytes:
    """``serde.encode`` as it was before decision 0027: fastavro, after qualifying union names."""
    buf = io.BytesIO()
    buf.write(bytes((serde.MAGIC, CURRENT_VERSION)))
    fastavro.schemaless_writer(buf, serde.codec(record)._schema, _qualified(value))
    return buf.getvalue()


def fastavro_decode(record: str, data: bytes) -> dict:
    """``serde.decode`` of a current-version record as it was before decision 0027."""
    buf = io.BytesIO(data)
    buf.seek(2)
    return _short(
        fastavro.schemaless_reader(
            buf, serde.codec(record)._schema, None, return_record_name=True, return_record_name_override=True
        )
    )


def _per_record(fn, items) -> float:
    t0 = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - t0) / len(items) * 1e6


def _closure_codecs(record: str):
    """The closure codecs of decision 0027 (``avro_binary``), which decision 0030 replaced by
    generated functions on the hot path: encode(value) and decode(raw) like serde's."""
    schema = serde.codec(record)._schema
    put, get = avro_binary.compile_writer(schema), avro_binary.compile_reader(schema)
    prefix = bytes((serde.MAGIC, CURRENT_VERSION))

    def encode(value):
        buf = bytearray(prefix)
        put(buf, value)
        return bytes(buf)

    def decode(raw):
        return get(raw, 2)[0]

    return encode, decode


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    n = int(argv[0]) if argv else 300
    recs = _records(n)
    print(
        f"{n} three-activity workflows; microseconds per record (best of 3); fastavro = the serde path "
        f"before decision 0027, closures = decision 0027's codecs, generated = serde today (0030)"
    )
    print(
        f"{'record':14} {'per wf':>6} {'bytes':>6} {'enc fastavro':>13} {'closures':>9} {'generated':>10} "
        f"{'dec fastavro':>13} {'closures':>9} {'generated':>10}"
    )
    totals = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    for name, values in sorted(recs.items()):
        codec = serde.codec(name)
        raws = [codec.encode(v) for v in values]
        cl_encode, cl_decode = _closure_codecs(name)

        def fa_encode(v, name=name):
            fastavro_encode(name, v)

        def fa_decode(raw, name=name):
            fastavro_decode(name, raw)

        row = [
            min(_per_record(fn, items) for _ in range(3))
            for fn, items in (
                (fa_encode, values),
                (cl_encode, values),
                (codec.encode, values),
                (fa_decode, raws),
                (cl_decode, raws),
                (codec.decode, raws),
            )
        ]
        per_wf = len(values) / n
        totals = [t + r * per_wf for t, r in zip(totals, row, strict=True)]
        print(
            f"{name:14} {per_wf:6.2f} {sum(map(len, raws)) / len(raws):6.0f} {row[0]:13.1f} {row[1]:9.1f} "
            f"{row[2]:10.1f} {row[3]:13.1f} {row[4]:9.1f} {row[5]:10.1f}"
        )
    print(
        f"per workflow, ms: encoding fastavro {totals[0] / 1000:.3f}, closures {totals[1] / 1000:.3f}, generated "
        f"{totals[2] / 1000:.3f}; decoding fastavro {totals[3] / 1000:.3f}, closures {totals[4] / 1000:.3f}, "
        f"generated {totals[5] / 1000:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
