"""What a reply to a command stands for (``topics.protocol``), read in one place for the SDK
client, the gateway and the CLI: each status is the same error of the tree wherever it is read."""

from __future__ import annotations

import pytest

from kadence.topics.errors import (
    CommandRejectedError,
    QueryFailedError,
    WorkflowAlreadyStartedError,
    WorkflowError,
    WorkflowNotFoundError,
)
from kadence.topics.protocol import check_found, expect_ok, refusal


def _reply(status: str, message: str = "", run_id: str | None = "r1") -> dict:
    return {"status": status, "message": message, "run_id": run_id}


def test_an_applied_command_is_no_refusal():
    ok = _reply("ok")
    assert refusal(ok, "w", what="signal of 'w' rejected") is None
    assert expect_ok(ok, "w", what="x") is ok
    check_found(ok, "w")  # raises nothing


def test_no_such_workflow_is_not_found_with_the_engines_words_or_a_default():
    with pytest.raises(WorkflowNotFoundError, match="no run r9") as got:
        expect_ok(_reply("not_found", "no run r9"), "w", what="x")
    assert got.value.workflow_id == "w" and got.value.engine_message == "no run r9"
    with pytest.raises(WorkflowNotFoundError, match="workflow 'w' not found"):
        check_found(_reply("not_found"), "w", "r2")


def test_a_start_that_meets_an_open_run_is_already_started():
    err = refusal(_reply("already_started", "workflow is already running", "r7"), "w", what="start of 'w' rejected")
    assert isinstance(err, WorkflowAlreadyStartedError)
    assert err.run_id == "r7" and err.engine_message == "workflow is already running"
    assert str(err) == "workflow 'w' already started (run r7): workflow is already running"


def test_any_other_status_is_the_operations_refusal_with_the_engines_words():
    err = refusal(_reply("not_running", "the run is closed"), "w", what="SignalWorkflow of 'w' rejected")
    assert type(err) is CommandRejectedError and isinstance(err, WorkflowError)
    assert str(err) == "SignalWorkflow of 'w' rejected: the run is closed" and err.engine_message == "the run is closed"
    failed = refusal(_reply("failed"), "w", what="query 'q' of 'w' failed", error=QueryFailedError)
    assert type(failed) is QueryFailedError and str(failed) == "query 'q' of 'w' failed: failed"
    assert failed.engine_message == "failed" and failed.run_id == "r1"


def test_every_command_body_a_caller_sends_is_built_here():
    from kadence.topics.errors import InvalidIdentifierError
    from kadence.topics.protocol import cancel_body, operator_body, query_body, result_body, start_body, update_body

    assert cancel_body("late") == {"reason": "late"}
    assert operator_body("stuck", "ops@ann") == {"reason": "stuck", "identity": "ops@ann"}
    assert query_body("status", b"[]") == {"query_name": "status", "input": b"[]"}
    assert result_body(wait=False) == {"wait": False}
    start = start_body("Cart", "q", b"[]")
    got = update_body("add", b"[1]", identity="gateway", start=start)
    assert got == {"update_name": "add", "input": b"[1]", "start": start, "identity": "gateway"}
    for bad in (None, "", "a/b"):
        with pytest.raises(InvalidIdentifierError):
            query_body(bad, b"[]")
    with pytest.raises(InvalidIdentifierError):
        update_body("a/b", b"[]", identity="x")
