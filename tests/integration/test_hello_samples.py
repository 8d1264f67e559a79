"""Kadence's sample for each concept of Temporal's ``hello`` folder (issue 44) runs on the broker
with its expected outcome; docs/migrating-from-temporal.md lists them."""

from __future__ import annotations

import importlib
import logging
from datetime import UTC, datetime

import pytest

EXPECTED = {
    "hello_activity": "Hello, World!",
    "hello_activity_sync": "Hello, threads!",
    "hello_activity_choice": ["ordered 3 apples", "ordered 2 bananas"],
    "hello_activity_heartbeat": {"attempt": 2, "resumed": True},
    "hello_activity_retry": "Hello, World! (attempt 4)",
    "hello_activity_method": 3,
    "hello_activity_multiprocess": None,  # checked below: a digest computed in a child process
    "hello_async_activity_completion": "yes, ship it",
    "hello_cancellation": "canceled, cleaned up: ['cancelled']",
    "hello_child_workflow": "Hello, child!",
    "hello_continue_as_new": 4,
    "hello_cron": ["daily", "daily", "daily"],
    "hello_eager_start": ["Hello, SDK!", "Hello, HTTP!"],
    "hello_exception": "WorkflowFailureError: checkout failed: card declined",
    "hello_local_activity": "HELLO, LOCAL",
    "hello_parallel_activity": ["Hello, a!", "Hello, b!", "Hello, c!"],
    "hello_patch": "Hello, patch!",
    "hello_query": ["Hello, query!", "Goodbye, query!"],
    "hello_search_attributes": {
        "Customer": "ann",
        "Tags": ["vip", "eu"],
        "Priority": 3,
        "Amount": 99.5,
        "Urgent": True,
        "Due": datetime(2027, 1, 15, 9, 30, tzinfo=UTC),
        "Stage": "done",
    },
    "hello_signal": ["Hello, ann!", "Hello, bo!"],
    "hello_update": ["english", "rejected", "spanish"],
    "hello_log": "log",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_the_hello_sample_runs_on_the_broker(name, client, processors, caplog):
    processors.start()
    processors.start_timers()
    caplog.set_level(logging.INFO, logger="kadence.workflow")
    sample = importlib.import_module(f"kadence.samples.{name}")
    result = await sample.main(client)
    if name == "hello_activity_multiprocess":
        assert result["in_a_child_process"] and len(result["digest"]) == 16
        return
    assert result == EXPECTED[name]
    if name == "hello_log":  # written once, not again when the workflow replayed its history
        starts = [r for r in caplog.records if r.name == "kadence.workflow" and "starting for log" in r.getMessage()]
        assert len(starts) == 1, [r.getMessage() for r in starts]
