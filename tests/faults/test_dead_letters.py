"""Dead letters: a poison command is dead-lettered, repaired and redriven once; stuck workflows
are listed with their error."""

import json

from confluent_kafka import Producer

from kadence import Worker
from kadence.topics import Catalogue, serde
from kadence.topics.records import command
from tests.integration.conftest import wait_until
from tests.integration.invariants import histories
from tests.integration.workflows import GATES, Gated, GatedChanged, ThreeSteps, add, double, gate, three_steps_result
from tests.support.cli import kadence


async def test_poison_start_is_redriven_once_after_repair(client, processors, kafka_config, tmp_path):
    topics = Catalogue(kafka_config)
    good = serde.encode(
        "Command",
        command(
            "repaired-1",
            "StartWorkflow",
            {"workflow_type": "ThreeSteps", "task_queue": "q", "input": b"[5]"},
            request_id="start-repaired-1",
        ),
    )
    broken = good[2:]  # a producer that forgot the two-byte version prefix
    producer = Producer(kafka_config.producer())
    producer.produce(topics.commands, broken, b"repaired-1")
    producer.flush(10)
    processors.start()
    rc, out, err = None, "", ""

    async def listed():
        nonlocal out
        _rc, out, _ = await kadence(kafka_config, "dlq", "list")
        return "pending" in out

    await wait_until(listed, 60, "the poison record in the dead-letter topic")
    ref = out.split()[0]
    assert "undecodable command" in out
    rc, shown, err = await kadence(kafka_config, "dlq", "show", ref)
    assert rc == 0 and json.loads(shown)["origin_topic"] == topics.commands
    fixed = tmp_path / "fixed.bin"
    fixed.write_bytes(good)
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        rc, out, err = await kadence(kafka_config, "dlq", "redrive", ref, "--value-file", str(fixed))
        assert rc == 0, err
        rc, out, err = await kadence(kafka_config, "dlq", "redrive", ref, "--value-file", str(fixed))
        assert rc == 1 and "already redriven" in err
        result = await client.get_workflow_handle("repaired-1").result(timeout=60)
    assert result == three_steps_result(5)
    assert [k for k in histories(kafka_config) if k[0] == "repaired-1"].__len__() == 1
    rc, out, err = await kadence(kafka_config, "dlq", "list")
    assert out.split()[1] == "redriven"
    rc, out, err = await kadence(kafka_config, "dlq", "list", "-o", "json")
    (item,) = json.loads(out)["items"]
    assert rc == 0 and item["ref"] == ref and item["state"] == "redriven" and item["origin_topic"].endswith(".commands")
    rc, out, err = await kadence(kafka_config, "dlq", "list", "-o", "table")
    assert out.splitlines()[0].split() == ["ref", "state", "component", "origin", "reason"], out


async def test_stuck_workflows_are_listed_with_their_error(client, processors, kafka_config):
    processors.start()
    GATES.pop("stuck-1", None)
    async with Worker(client, task_queue="gates", activities=[gate]):
        async with Worker(client, task_queue="q", workflows=[Gated], activities=[add, double]):
            handle = await client.start_workflow(Gated, 1, id="stuck-1", task_queue="q")
            await wait_until(lambda: "stuck-1" in GATES, 60, "the gate to start")
        async with Worker(client, task_queue="q", workflows=[GatedChanged], activities=[add, double]):
            GATES["stuck-1"].set()

            async def is_stuck():
                return (await handle.describe())["last_task_failure"]

            await wait_until(is_stuck, 60, "the workflow task to fail")
    rc, out, err = await kadence(kafka_config, "stuck")
    assert rc == 0, err
    [line] = out.strip().splitlines()
    assert line.startswith("stuck-1\t") and "non_determinism" in line and "NonDeterminismError" in line
    rc, out, err = await kadence(kafka_config, "stuck", "-o", "json")
    (item,) = json.loads(out)["items"]
    assert (item["workflow_id"], item["cause"], item["error_type"]) == (
        "stuck-1",
        "non_determinism",
        "NonDeterminismError",
    )


async def test_command_on_the_wrong_partition_is_dead_lettered_with_the_expected_one(client, processors, kafka_config):
    """A start produced to a partition its workflow ID does not hash to (murmur2) creates nothing:
    it is dead-lettered as "wrong partition" and its request is answered naming the partition."""
    from kadence.topics.partitioner import partition_for
    from tests.integration.invariants import read_topic

    topics = Catalogue(kafka_config)
    wf = "misrouted-1"
    expected = partition_for(wf, kafka_config.partitions)
    wrong = (expected + 1) % kafka_config.partitions
    start = serde.encode(
        "Command",
        command(
            wf,
            "StartWorkflow",
            {"workflow_type": "ThreeSteps", "task_queue": "q", "input": b"[5]"},
            request_id="start-misrouted-1",
        ),
    )
    producer = Producer(kafka_config.producer())
    producer.produce(topics.commands, start, wf.encode(), partition=wrong)
    producer.flush(10)
    processors.start()

    def replied():
        return [v for k, v, _p, _o in read_topic(kafka_config, topics.replies, "Reply") if k == b"start-misrouted-1"]

    (answer,) = await wait_until(replied, 60, "the reply to the misrouted start")
    assert answer["status"] == "wrong_partition"
    assert f"partition {expected}" in answer["message"] and f"partition {wrong}" in answer["message"]
    letters = [v for _k, v, _p, _o in read_topic(kafka_config, topics.dlq, "DeadLetter")]
    assert [(d["origin_partition"], d["error_type"]) for d in letters] == [(wrong, "WrongPartitionError")]
    assert letters[0]["reason"].startswith("wrong partition")
    assert not [k for k in histories(kafka_config) if k[0] == wf], "the misrouted start created a run"
    # the same start on the right partition works: nothing was remembered from the misrouted one
    async with Worker(client, task_queue="q", workflows=[ThreeSteps], activities=[add, double]):
        handle = await client.start_workflow(ThreeSteps, 5, id=wf, task_queue="q", request_id="start-misrouted-2")
        assert await handle.result(timeout=60) == three_steps_result(5)
