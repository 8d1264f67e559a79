"""`kadence replay` checks histories from the real history topic and from exported files."""

import json

from kadence import Worker
from tests.replay.workflows_v1 import Fees, charge
from tests.support.cli import kadence


async def test_replay_from_topic_passes_for_the_same_code_and_names_the_divergence_otherwise(
    client, processors, kafka_config, tmp_path
):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[Fees], activities=[charge]):
        handles = [await client.start_workflow(Fees, 100 * i, id=f"fees-{i}", task_queue="q") for i in range(3)]
        for h in handles:
            await h.result(timeout=60)
    rc, out, err = await kadence(kafka_config, "replay", "--module", "tests.replay.workflows_v1", "--from-topic")
    assert rc == 0, err
    assert "3 histories replayed, 0 failed" in out
    rc, out, err = await kadence(kafka_config, "replay", "--module", "tests.replay.workflows_unsafe", "--from-topic")
    assert rc == 1
    assert "history event 4 is ActivityTaskScheduled(activity_type='charge'" in err
    # a history exported with `kadence history` replays from its file
    rc, out, err = await kadence(kafka_config, "history", "fees-1")
    path = tmp_path / "fees-1.json"
    path.write_text(out)
    assert json.loads(out)[-1]["type"] == "WorkflowExecutionCompleted"
    rc, out, err = await kadence(kafka_config, "replay", "--module", "tests.replay.workflows_v1", str(path))
    assert rc == 0 and "1 histories replayed, 0 failed" in out
