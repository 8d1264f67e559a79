"""``KADENCE_LOG_FORMAT=json`` (issue 21, item 4): every line a processor writes is one JSON object,
librdkafka's included; a line about a workflow carries its workflow ID, run ID and partition; the
workflow's payload never reaches the log."""

from __future__ import annotations

import json
import uuid

from kadence.topics import partition_for

from .conftest import wait_until


async def test_a_processor_logging_json_names_the_workflow_on_its_lines_and_never_its_payload(
    processors, kafka_config, client, tmp_path
):
    processors.start("p0", env={"KADENCE_LOG_FORMAT": "json"})
    marker = f"payload-marker-{uuid.uuid4().hex}"
    # by type name: the marker is not an int, and a start by the class is checked against its
    # run method's types before anything is sent (nobody runs this workflow anyway)
    handle = await client.start_workflow("ThreeSteps", marker, id="json-logs-1", task_queue="nobody-polls", timeout=60)
    await handle.terminate(reason="no worker for it")
    logs = lambda: "".join(p.read_text() for p in tmp_path.glob("processor-p0-*.log"))  # noqa: E731
    await wait_until(lambda: "terminated by" in logs(), 60, "the processor logging the terminate")
    lines = [json.loads(line) for line in logs().splitlines() if line.strip()]  # each line parses, or this fails
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines), lines[:3]
    [line] = [line for line in lines if "terminated by" in line["message"]]
    assert line["workflow_id"] == "json-logs-1" and line["run_id"] == handle.run_id
    assert line["partition"] == partition_for("json-logs-1", kafka_config.partitions)
    assert line["level"] == "warning" and line["logger"].startswith("kadence.processors")
    assert any(line["message"].startswith("processor p0 started") and "workflow_id" not in line for line in lines)
    assert marker not in logs()
