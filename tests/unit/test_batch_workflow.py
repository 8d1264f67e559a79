"""The batch workflow's logic on ``kadence.testing`` (no broker, no Redis): pages are walked to
the end across continue-as-new, progress adds up, failures are kept in order and capped, a page
that fails is retried, and bad requests are refused before anything starts. The activities are
stand-ins under the real activity names; tests/integration/test_batch.py runs the real ones."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from kadence import activity
from kadence.operations import BATCH_TASK_QUEUE, Batch, BatchFilter, BatchProgress, BatchRequest
from kadence.operations.batch import _Applied, _Page
from kadence.testing import WorkflowEnvironment
from kadence.topics.errors import ConfigError

RUNS = [f"wf-{i:03d}" for i in range(23)]
SENT: list[tuple[str, str]] = []
FLAKY = {"left": 0}


@activity.defn(name="kadence.batch.count")
async def count(f: BatchFilter) -> int:
    return len(RUNS)


@activity.defn(name="kadence.batch.page")
async def page(f: BatchFilter, cursor: str | None, page_size: int) -> _Page:
    start = int(cursor or 0)
    end = start + page_size
    return _Page(workflow_ids=RUNS[start:end], cursor=str(end) if end < len(RUNS) else None)


@activity.defn(name="kadence.batch.apply")
async def apply(request: BatchRequest, batch_id: str, workflow_ids: list[str]) -> _Applied:
    if FLAKY["left"]:
        FLAKY["left"] -= 1
        raise ConnectionError("the broker did not answer")
    SENT.extend((batch_id, wf) for wf in workflow_ids)
    failures = [{"workflow_id": wf, "error": "workflow is completed"} for wf in workflow_ids if wf.endswith("7")]
    return _Applied(succeeded=len(workflow_ids) - len(failures), failures=failures)


async def test_a_batch_walks_every_page_across_continue_as_new_and_counts_them():
    SENT.clear()
    FLAKY["left"] = 1
    req = BatchRequest(operation="terminate", filter=BatchFilter(workflow_type="Order"), page_size=5, pages_per_run=2)
    async with WorkflowEnvironment(workflows=[Batch], activities=[count, page, apply]) as env:
        handle = await env.client.start_workflow(Batch, req, id="batch-u1", task_queue=BATCH_TASK_QUEUE)
        await env.sleep(5)  # the first page's retry backoff
        result = await handle.result()
        history = await env.client.get_workflow_handle("batch-u1").history()
        progress = await handle.query("progress", result_type=BatchProgress)
    assert SENT == [("batch-u1", wf) for wf in RUNS]  # each run once, in list order
    assert (result.total, result.done, result.succeeded, result.failed, result.finished) == (23, 23, 21, 2, True)
    assert [f["workflow_id"] for f in result.failures] == ["wf-007", "wf-017"]
    assert asdict(progress) == asdict(result)
    assert history[0]["attributes"]["continued_from_run_id"]  # 5 pages at 2 a run: the last run continued


def test_a_batch_request_is_checked_before_it_starts():
    with pytest.raises(ConfigError, match="operation must be one of"):
        BatchRequest(operation="explode", filter=BatchFilter(status="running")).check()
    with pytest.raises(ConfigError, match="needs the signal's name"):
        BatchRequest(operation="signal", filter=BatchFilter(status="running")).check()
    with pytest.raises(ConfigError, match="at least one filter"):
        BatchRequest(operation="terminate").check()
    BatchRequest(operation="reset", filter=BatchFilter(paused=True)).check()
