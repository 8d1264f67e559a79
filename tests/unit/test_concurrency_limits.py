"""Concurrency limits in the state machine (decision 0057), on several simulated shards: a limit's
owner is the shard its key hashes to, the commands between shards are delivered in the order
each shard wrote them, and which shard runs next is random. The broker tests prove the same
across processor kills and partition moves (tests/integration/test_concurrency_limits.py)."""

from __future__ import annotations

import pytest

from kadence import InvalidArgumentError, Limit, SchemaError
from kadence._definitions import limit_records
from kadence.processors import concurrency
from kadence.processors.effects import BatchView, Outbox
from kadence.processors.store import MemoryShardStore
from kadence.topics import serde
from kadence.topics.concurrency import command_key, limits_problem
from kadence.topics.partitioner import partition_for
from kadence.topics.protocol import start_body
from kadence.topics.queue_limits import QueueLimit, decode_queue_limit, limit_summary
from kadence.topics.records import command
from tests.support.codecs import pin_write_version
from tests.support.slot_shards import OPTIONS, PARTITIONS, Shards


def _running_holders(shards: Shards, workflows) -> dict[tuple[str, str], int]:
    """Per limit key, the open runs that hold its slot (from the workflows' own states)."""
    counts: dict[tuple[str, str], int] = {}
    for wf in workflows:
        st = shards.state(wf)
        if st is None or st["status"] != "running":
            continue
        for lim in st["concurrency"][: st["slots_held"]]:
            counts[(lim["name"], lim["value"])] = counts.get((lim["name"], lim["value"]), 0) + 1
    return counts


@pytest.mark.parametrize("inline", [0.0, 0.5])
@pytest.mark.parametrize("seed", range(12))
def test_a_limit_is_never_exceeded_and_every_run_gets_its_turn(seed, inline):
    """Runs of two tenants under a hierarchy (tenant max 3, api max 2 for half of them) start,
    complete, are terminated and started again in a random interleaving of three shards: no key
    ever has more holders than its max, by the owners' records or by the runs' states; a run
    runs code only once it holds every slot; in the end every slot is back. With ``inline``, half
    the slot commands overtake what their shard has queued (a release before the acquire it
    answers): a grant to a closed request is given back, so no slot leaks."""
    shards = Shards(seed, inline=inline)
    rng = shards.rng
    workflows = [f"wf-{i}" for i in range(24)]
    maxes = {("tenant", "a"): 3, ("tenant", "b"): 3, ("api", "x"): 2}
    for i, wf in enumerate(workflows):
        limits = [Limit("tenant", "a" if i % 2 else "b", max=3)]
        if i % 3 == 0:
            limits.append(Limit("api", "x", max=2))
        shards.start(wf, limits)
    restarted: set[str] = set()
    completed: set[str] = set()
    for _ in range(400):
        shards.run_some(rng.randint(1, 6))
        wf = rng.choice(workflows)
        if rng.random() < 0.15 and wf not in restarted and shards.state(wf) is not None:
            # terminated wherever it is (waiting, its request or its grant on the way), started again
            restarted.add(wf)
            st = shards.state(wf)
            shards.send(wf, "TerminateWorkflow", {"reason": "test", "identity": "t"}, request_id=f"term-{wf}")
            shards.start(wf, [Limit(x["name"], x["value"], max=x["max"]) for x in st["concurrency"]], rid=f"again-{wf}")
        for key, n in _running_holders(shards, workflows).items():
            assert n <= maxes[key], (key, n)
        for (name, value), top in maxes.items():
            cs = shards.owner(name, value)
            assert cs is None or len(cs["holders"]) <= top
        for task in shards.take_tasks():
            st = shards.state(task["workflow_id"])
            if st["run_id"] != task["run_id"]:
                continue  # a task of a run terminated since: its completion would be stale
            assert st["slots_held"] == len(st["concurrency"]), "a run's code ran before it held its slots"
            if rng.random() < 0.2 and task["workflow_id"] not in restarted:  # terminated, started again
                wf = task["workflow_id"]
                restarted.add(wf)
                shards.send(wf, "TerminateWorkflow", {"reason": "test", "identity": "t"}, request_id=f"term-{wf}")
                limits = [Limit(lim["name"], lim["value"], max=lim["max"]) for lim in st["concurrency"]]
                shards.start(wf, limits, rid=f"again-{wf}")
            else:
                shards.complete(task)
                completed.add(task["workflow_id"])
        if not any(shards.inboxes) and not shards.tasks:
            break
    shards.drain()
    for task in shards.take_tasks():
        shards.complete(task)
    shards.drain()
    for wf in workflows:
        assert shards.state(wf)["status"] in ("completed",), wf
    for name, value in maxes:
        cs = shards.owner(name, value)
        assert cs["holders"] == [] and cs["waiters"] == []
    acquired = [e for e in shards.events if e["attributes"][0] == "ConcurrencySlotAcquired"]
    # one acquisition per limit per run that ran (a terminated run may have held some)
    assert len(acquired) >= sum(1 + (i % 3 == 0) for i in range(24))


def test_waiters_are_admitted_first_come_first_served():
    shards = Shards()
    for i in range(4):
        shards.start(f"fifo-{i}", [Limit("one", "x", max=1)])
        shards.drain()
    order = []
    for _ in range(4):
        (task,) = shards.take_tasks()
        order.append(task["workflow_id"])
        shards.complete(task)
        shards.drain()
    assert order == ["fifo-0", "fifo-1", "fifo-2", "fifo-3"]
    waited = [e["attributes"][1]["waited_ms"] for e in shards.events if e["attributes"][0] == "ConcurrencySlotAcquired"]
    assert waited[0] < waited[-1]


def test_continue_as_new_keeps_the_slot_and_a_signal_waits_with_the_run():
    shards = Shards()
    shards.start("holder", [Limit("one", "y", max=1)])
    shards.start("waiter", [Limit("one", "y", max=1)])
    shards.drain()
    shards.send("waiter", "SignalWorkflow", {"signal_name": "s", "input": b"[]", "start": None, "identity": ""})
    shards.drain()
    (task,) = shards.take_tasks()  # the holder's; the signalled waiter has no task yet
    assert task["workflow_id"] == "holder"
    described = shards.state("waiter")
    assert described["wt_needed"] and described["slots_held"] == 0
    shards.complete(task, [("ContinueAsNewWorkflowExecution", {"input": b"[]"})])
    shards.drain()
    (task,) = shards.take_tasks()
    assert task["workflow_id"] == "holder" and task["run_id"] != described["run_id"]  # the next run runs
    assert shards.owner("one", "y")["waiters"][0]["holder"] == "waiter"
    shards.complete(task)
    shards.drain()
    (task,) = shards.take_tasks()
    assert task["workflow_id"] == "waiter"
    kinds = [e["attributes"][0] for e in task["events"]]
    assert kinds[:3] == ["WorkflowExecutionStarted", "WorkflowSignaled", "ConcurrencySlotAcquired"]


def test_a_late_grant_of_a_terminated_run_is_not_taken_by_the_next_run():
    """A grant on its way while the run it was for is terminated and a new run of the same ID
    waits: the new run does not take it (its ticket differs) and gets its own turn."""
    shards = Shards()
    shards.start("a", [Limit("k", "z", max=1)])
    shards.drain()
    shards.start("b", [Limit("k", "z", max=1)])
    shards.drain()
    (task_a,) = shards.take_tasks()
    shards.complete(task_a)  # a's close releases; the owner grants b
    key_partition = partition_for(command_key("k", "z"), PARTITIONS)
    b_partition = partition_for("b", PARTITIONS)
    while shards.inboxes[partition_for("a", PARTITIONS)]:
        shards.step(partition_for("a", PARTITIONS))
    while shards.inboxes[key_partition]:
        shards.step(key_partition)
    assert shards.owner("k", "z")["holders"][0]["holder"] == "b"
    # b is terminated and started again before the grant reaches it
    shards.inboxes[b_partition].appendleft(
        command("b", "TerminateWorkflow", {"reason": "", "identity": ""}, request_id="t")
    )
    shards.inboxes[b_partition].insert(
        1,
        command(
            "b",
            "StartWorkflow",
            {
                "workflow_type": "W",
                "task_queue": "q",
                "input": b"[]",
                "concurrency": [Limit("k", "z", max=1).to_record()],
            },
            request_id="b2",
        ),
    )
    shards.drain()
    (task,) = shards.take_tasks()  # the new run of b, after its own grant
    st = shards.state("b")
    assert task["run_id"] == st["run_id"] == st["slot_ticket"]
    cs = shards.owner("k", "z")
    assert [(h["holder"], h["ticket"]) for h in cs["holders"]] == [("b", st["run_id"])] and cs["waiters"] == []


def test_an_activity_is_dispatched_only_with_its_slot_and_returns_it_when_it_closes():
    shards = Shards()
    limited = {**OPTIONS, "concurrency": [Limit("api", "stripe", max=1).to_record()]}
    shards.runs_scheduling_one_activity(("pay-1", "pay-2"), limited)
    (first,) = shards.take_tasks("activity")  # one slot: one attempt out, the other waits
    other = "pay-2" if first["workflow_id"] == "pay-1" else "pay-1"
    waiting = shards.state(other)["pending_activities"][0]
    assert waiting["slots_held"] == 0 and waiting["options"]["concurrency"][0]["name"] == "api"
    shards.send(
        first["workflow_id"],
        "RespondActivityTaskCompleted",
        {"activity_id": "1", "scheduled_seq": first["scheduled_seq"], "attempt": 1, "result": b"1"},
        run_id=first["run_id"],
    )
    shards.drain()
    (second,) = shards.take_tasks("activity")
    assert second["workflow_id"] == other
    assert len(shards.owner("api", "stripe")["holders"]) == 1


def test_a_full_queue_refuses_and_fails_the_run(monkeypatch):
    monkeypatch.setattr(concurrency, "MAX_QUEUE_BYTES", 200)
    shards = Shards()
    for i in range(6):
        shards.start(f"full-{i}", [Limit("q", "full", max=1)])
        shards.drain()
    failed = [
        e
        for e in shards.events
        if e["attributes"][0] == "WorkflowExecutionFailed" and e["aggregate_key"].startswith("full-")
    ]
    assert failed, "nothing was refused"
    failure = failed[0]["attributes"][1]["failure"]
    assert failure["type"] == "ConcurrencyQueueFull" and "queue is full" in failure["message"]
    cs = shards.owner("q", "full")
    assert len(cs["holders"]) == 1 and not any(w["holder"] == failed[0]["aggregate_key"] for w in cs["waiters"])


def test_bad_limits_are_refused_with_a_typed_error_and_by_the_engine():
    with pytest.raises(InvalidArgumentError, match="max must be"):
        Limit("tenant", "a", max=0)
    with pytest.raises(InvalidArgumentError, match="no '='"):
        Limit("a=b", "c", max=1)
    assert "named twice" in limits_problem([{"name": "t", "value": "a", "max": 1}] * 2)
    shards = Shards()
    shards.send(
        "bad",
        "StartWorkflow",
        {
            "workflow_type": "W",
            "task_queue": "q",
            "input": b"[]",
            "concurrency": [{"name": "", "value": "a", "max": 1}],
        },
        request_id="bad",
    )
    shards.drain()
    assert shards.replies[-1]["status"] == "rejected" and "invalid concurrency" in shards.replies[-1]["message"]
    assert shards.state("bad") is None


def test_a_child_workflow_takes_the_limits_its_parent_names():
    shards = Shards()
    shards.start("parent", [])
    shards.drain()
    (task,) = shards.take_tasks()
    child = {
        "workflow_id": "child",
        "workflow_type": "C",
        "task_queue": "q",
        "input": b"[]",
        "parent_close_policy": "terminate",
        "run_timeout_ms": None,
        "concurrency": [Limit("tenant", "kids", max=1).to_record()],
    }
    shards.complete(task, [("StartChildWorkflowExecution", child)])
    shards.drain()
    st = shards.state("child")
    assert (
        st["concurrency"] == [{"name": "tenant", "value": "kids", "max": 1, "per_ms": None}] and st["slots_held"] == 1
    )
    assert [h["holder"] for h in shards.owner("tenant", "kids")["holders"]] == ["child"]


def test_a_release_that_overtakes_its_acquire_leaves_no_ghost_holder():
    """y's request is still queued at the owner when y is terminated, and its release is applied
    first (as when the processor applies a release in the batch that sends it while the request
    waits on the topic). The owner then queues y's request and later grants it to no one; the
    grant reaching the closed run is given back, and the next run gets the slot."""
    shards = Shards()
    key_partition = partition_for(command_key("k", "ghost"), PARTITIONS)
    shards.start("x", [Limit("k", "ghost", max=1)])
    shards.drain()
    (task_x,) = shards.take_tasks()
    shards.start("y", [Limit("k", "ghost", max=1)])
    y_partition = partition_for("y", PARTITIONS)
    while shards.inboxes[y_partition]:
        shards.step(y_partition)  # y's start: its acquire now waits in the owner's inbox
    shards.send("y", "TerminateWorkflow", {"reason": "", "identity": ""}, request_id="term-y")
    while shards.inboxes[y_partition]:
        shards.step(y_partition)  # y's release is queued behind its acquire: move it ahead
    inbox = shards.inboxes[key_partition]
    inbox.appendleft(inbox.pop())
    shards.step(key_partition)  # the release: y holds nothing, waits for nothing
    shards.step(key_partition)  # the acquire: y is queued behind x
    assert [w["holder"] for w in shards.owner("k", "ghost")["waiters"]] == ["y"]
    shards.complete(task_x)
    shards.start("z", [Limit("k", "ghost", max=1)])
    shards.drain()
    (task_z,) = shards.take_tasks()  # the slot y was granted came back, and z got it
    assert task_z["workflow_id"] == "z"
    assert [h["holder"] for h in shards.owner("k", "ghost")["holders"]] == ["z"]


def test_a_queue_rule_limits_every_activity_scheduled_on_the_queue():
    """An operator's rule (``kadence queues set-limit q -c charge=1 -c '*=5'``): activities of the
    queue take the rule's limits besides their own; other types only the queue-wide one."""
    rules = QueueLimit("q", activity_concurrency={"charge": 1, "*": 5})
    assert rules.concurrency_of("charge") == [
        {"name": "queue", "value": "q", "max": 5},
        {"name": "queue", "value": "q/charge", "max": 1},
    ]
    shards = Shards(queue_limits={"q": rules})
    for wf in ("r-1", "r-2"):
        shards.start(wf, [])
    shards.drain()
    for task in shards.take_tasks():
        shards.complete(
            task,
            [
                (
                    "ScheduleActivityTask",
                    {"activity_id": "1", "activity_type": "charge", "input": b"[]", "options": OPTIONS},
                ),
                (
                    "ScheduleActivityTask",
                    {"activity_id": "2", "activity_type": "mail", "input": b"[]", "options": OPTIONS},
                ),
            ],
        )
    shards.drain()
    dispatched = sorted(t["activity_type"] for t in shards.take_tasks("activity"))
    assert dispatched == ["charge", "mail", "mail"]  # one charge at a time
    # the waiting charge holds the queue-wide slot already (taken first: key order)
    assert len(shards.owner("queue", "q")["holders"]) == 4
    assert [w["holder"] for w in shards.owner("queue", "q/charge")["waiters"]] in (["r-1"], ["r-2"])


def test_queue_rules_are_checked_and_summarised():
    with pytest.raises(InvalidArgumentError, match="whole number"):
        QueueLimit("q", activity_concurrency={"charge": 0})
    with pytest.raises(InvalidArgumentError, match="activity_concurrency must map"):
        QueueLimit("q", activity_concurrency=[("charge", 1)])
    limit = QueueLimit("q", 20, activity_concurrency={"charge": 3})
    assert limit.limited and limit_summary(limit) == "20/s, charge<=3 at once"
    assert decode_queue_limit("q", serde.encode("QueueLimit", limit.to_record())) == limit


def test_a_process_pinned_below_the_limits_version_refuses_them(monkeypatch):
    """During a rolling upgrade (``KADENCE_SCHEMA_WRITE_VERSION`` pinned to 16) the pinned writer
    would leave a start's limits out and the run would go unlimited: refused with ``SchemaError``."""
    pin_write_version(monkeypatch, "16")
    try:
        with pytest.raises(SchemaError, match="concurrency limits need schema version 17"):
            start_body("W", "q", b"[]", concurrency=[{"name": "tenant", "value": "a", "max": 1}])
        with pytest.raises(SchemaError, match="KADENCE_SCHEMA_WRITE_VERSION"):
            limit_records([Limit("api", "x", max=2)])
        assert start_body("W", "q", b"[]")["concurrency"] == []  # without limits: as before
    finally:
        pin_write_version(monkeypatch, None)


def test_in_batch_delivery_applies_slot_commands_of_owned_shards_and_produces_the_rest():
    """``routing.InlineDelivery``: an acquire for a key this instance's shard owns is applied in
    the batch (and the grant it causes too); a command for a quarantined workflow, or for a
    shard the instance does not own, stays in the batch's commands to be produced."""
    from kadence.processors.routing import InlineDelivery
    from kadence.topics.tracing import Tracer

    stores = {0: MemoryShardStore(0), 1: MemoryShardStore(1)}
    quarantine: dict = {0: {}, 1: {}}
    tables: dict = {0: {}, 1: {}}
    inline = InlineDelivery(stores, quarantine, lambda p, s: BatchView(s, limits=tables[p]), Tracer("test", None))
    inline.partitions = 3  # partition 2 belongs to another instance
    wf = next(f"w{i}" for i in range(100) if partition_for(f"w{i}", 3) == 1)
    key = next(f"k{i}" for i in range(100) if partition_for(command_key("t", f"k{i}"), 3) == 0)
    elsewhere = next(f"x{i}" for i in range(100) if partition_for(f"x{i}", 3) == 2)
    shards_of = {p: BatchView(stores[p], limits=tables[p]) for p in (0, 1)}
    views, outboxes = dict(shards_of), {1: Outbox()}
    acquire = {"kind": "acquire", "name": "t", "value": key, "max": 1, "holder": wf, "ticket": "r1",
               "activity_id": None, "requested_ms": 1, "message": ""}  # fmt: skip
    outboxes[1].commands.append((command_key("t", key), "ConcurrencySlot", acquire, None, None, None))
    grant_away = {**acquire, "kind": "grant", "holder": elsewhere}
    outboxes[1].commands.append((elsewhere, "ConcurrencySlot", grant_away, None, None, None))
    # the acquire, its grant (wf has no run: stale), and the release that gives it back
    assert inline.deliver(views, outboxes, 10) == 3
    assert [c[0] for c in outboxes[1].commands] == [elsewhere]
    state = views[0].limits[command_key("t", key)]
    assert (state["granted"], state["holders"], state["waiters"]) == (1, [], [])
    quarantine[1][wf] = "damaged"
    outboxes = {0: Outbox()}  # sent from the owner's shard, to a shard with nothing else this batch
    outboxes[0].commands.append((wf, "ConcurrencySlot", {**acquire, "kind": "grant"}, None, None, None))
    assert inline.deliver({}, outboxes, 11) == 0
    assert [c[0] for c in outboxes[0].commands] == [wf]  # produced, dead-lettered where it is read
