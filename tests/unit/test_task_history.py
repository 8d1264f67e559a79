"""``sdk._task_history``: a workflow task sent without its events gets them from the history
topic: through its ``WorkflowTaskScheduled`` (a query: all), only those after a cached
instance's last event when that instance runs the run, else the whole history."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kadence._task_history import with_events_from_topic
from kadence.topics.errors import NoReplyError


class Engine:
    def __init__(self, events, *, short: bool = False):
        self.events, self.short, self.asked = events, short, []

    async def history_through(self, workflow_id, run_id, seq):
        self.asked.append((workflow_id, run_id, seq))
        if self.short:
            raise NoReplyError("short")
        return self.events


def _events(n: int) -> list[dict]:
    return [{"seq": i, "run_id": "r1", "attributes": ("WorkflowExecutionSignaled", {})} for i in range(1, n + 1)]


def _task(**kw) -> dict:
    return {
        "workflow_id": "wf",
        "run_id": "r1",
        "scheduled_seq": 8,
        "full_history": False,
        "events": [],
        "query": None,
        "history_in_topic": True,
        **kw,
    }


def _cached(run_id="r1", last_seq=5, eager_token=None):
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id), last_seq=last_seq, eager_token=eager_token)


async def test_without_a_cached_instance_the_whole_history_through_the_task():
    engine = Engine(_events(10))  # two events recorded after the task (the next task's)
    task = await with_events_from_topic(engine, _task(), None)
    assert [e["seq"] for e in task["events"]] == list(range(1, 9)) and task["full_history"]
    assert engine.asked == [("wf", "r1", 8)]


async def test_with_the_run_cached_only_what_follows_its_last_event():
    task = await with_events_from_topic(Engine(_events(10)), _task(), _cached(last_seq=5))
    assert [e["seq"] for e in task["events"]] == [6, 7, 8] and not task["full_history"]


@pytest.mark.parametrize(
    ("cached", "full"), [(_cached(run_id="r0"), False), (_cached(eager_token="tok"), False), (_cached(), True)]
)
async def test_another_runs_instance_an_unconfirmed_eager_one_or_a_full_task_get_the_whole_history(cached, full):
    task = await with_events_from_topic(Engine(_events(8)), _task(full_history=full), cached)
    assert len(task["events"]) == 8 and task["full_history"]


async def test_a_query_gets_every_event_and_replays_from_the_start():
    engine = Engine(_events(10))
    task = await with_events_from_topic(engine, _task(query={"query_name": "q"}), _cached())
    assert len(task["events"]) == 10 and task["full_history"]
    assert engine.asked == [("wf", "r1", 0)]


async def test_a_history_the_broker_does_not_show_far_enough_is_an_error():
    with pytest.raises(NoReplyError):
        await with_events_from_topic(Engine([], short=True), _task(), None)
