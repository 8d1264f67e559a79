"""Names a Temporal port expects (issue 44, item 6), in the test environment: a signal sent by
its handler method, ``workflow.all_handlers_finished()``, search attribute values refused at
the call with the attribute named."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from kadence import (
    InvalidIdentifierError,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
    activity,
    workflow,
)
from kadence.testing import ActivityAttemptLimitError, WorkflowEnvironment
from kadence.topics import serde


@workflow.defn
class Approvals:
    def __init__(self) -> None:
        self.approved: list[str] = []
        self.audited: list[str] = []

    @workflow.signal
    async def approve(self, who: str) -> None:
        self.approved.append(who)
        await workflow.sleep(5)  # an async handler still at work when the run could end
        self.audited.append(who)

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: len(self.approved) >= 2)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.audited


async def test_a_signal_by_its_method_and_the_run_waits_for_its_handlers():
    async with WorkflowEnvironment(workflows=[Approvals]) as env:
        handle = await env.client.start_workflow(Approvals, id="ap-1", task_queue="q")
        await handle.signal(Approvals.approve, "ana")
        await handle.signal("approve", "bo")
        assert await handle.result(timeout=10) == ["ana", "bo"]  # both audits ran before the end


async def test_a_signal_that_is_no_handler_or_name_is_refused_before_anything_is_sent():
    async with WorkflowEnvironment(workflows=[Approvals]) as env:
        handle = await env.client.start_workflow(Approvals, id="ap-2", task_queue="q")
        with pytest.raises(InvalidIdentifierError, match="signal"):
            await handle.signal(Approvals.run, "x")
        await handle.signal(Approvals.approve, "ana")
        await handle.signal(Approvals.approve, "bo")
        assert await handle.result(timeout=10) == ["ana", "bo"]


@workflow.defn
class Tagged:
    @workflow.run
    async def run(self, tags: dict) -> str:
        workflow.upsert_search_attributes(tags)
        return "tagged"


DUE = datetime(2027, 1, 15, 9, 30, tzinfo=timezone(timedelta(hours=2)))


@workflow.defn
class TypedTags:
    @workflow.run
    async def run(self) -> list:
        seen = workflow.info().search_attributes
        workflow.upsert_search_attributes({"Priority": 7, "Due": DUE})
        return [seen["Amount"], workflow.info().search_attributes["Priority"]]


async def test_search_attributes_are_typed_and_come_back_as_given():
    """Keyword, keyword list, int, float, bool and datetime, at the start and upserted by the code;
    describe gives them back typed (a datetime in UTC), the workflow sees them in its info."""
    async with WorkflowEnvironment(workflows=[TypedTags]) as env:
        handle = await env.client.start_workflow(
            TypedTags,
            id="tag-typed",
            task_queue="q",
            search_attributes={"Regions": ["eu", "us"], "Amount": 12.5, "Urgent": False, "Tier": "gold"},
        )
        assert await handle.result(timeout=10) == [12.5, 7]
        got = (await handle.describe()).search_attributes
        assert got == {
            "Regions": ["eu", "us"],
            "Amount": 12.5,
            "Urgent": False,
            "Tier": "gold",
            "Priority": 7,
            "Due": DUE,
        }
        assert got["Due"].tzinfo is not None and got["Due"].utcoffset() == timedelta(0)
        assert (await handle.describe()).to_dict()["search_attributes"]["Due"] == {"datetime": "2027-01-15T07:30:00Z"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"eu"}, "search attribute 'Bad' has a set value"),
        (["eu", 3], "search attribute 'Bad' is a list whose item 1 is a int"),
        (datetime(2027, 1, 1), "search attribute 'Bad' is a naive datetime"),
        (float("nan"), "search attribute 'Bad' is not a finite float"),
        (2**63, "search attribute 'Bad' is an int outside 64 bits"),
        ({"datetime": "2027-01-01T00:00:00Z"}, "search attribute 'Bad' has a dict value"),
    ],
)
async def test_a_search_attribute_of_no_searchable_type_is_refused_naming_it(value, message):
    async with WorkflowEnvironment(workflows=[Tagged]) as env:
        with pytest.raises(InvalidIdentifierError, match=message) as info:
            await env.client.start_workflow(Tagged, {}, id="tag-1", task_queue="q", search_attributes={"Bad": value})
        assert info.value.field == "search_attributes.Bad"


async def test_a_bad_search_attribute_in_workflow_code_fails_its_task_not_the_run():
    async with WorkflowEnvironment(workflows=[Tagged]) as env:
        ok = await env.client.start_workflow(Tagged, {}, id="tag-2", task_queue="q", search_attributes={"Tier": "gold"})
        assert await ok.result(timeout=10) == "tagged"
        bad = await env.client.start_workflow(Tagged, {"Amount": {"usd": 12}}, id="tag-3", task_queue="q")
        with pytest.raises(Exception, match=r"search attribute 'Amount' has a dict value") as info:
            await asyncio.wait_for(bad.result(timeout=10), 10)
        # in workflow code it is a bug, not the run's outcome: the workflow task fails
        assert type(info.value).__name__ == "WorkflowTaskFailedError"


@workflow.defn
class Tally:
    def __init__(self) -> None:
        self.total = 0

    @workflow.signal
    def add(self, amount: int) -> None:
        self.total += amount

    @workflow.query
    def value(self) -> int:
        return self.total

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.total >= 5)
        return self.total


async def test_a_signal_that_does_not_fit_is_warned_about_once_not_on_every_replay_or_query(caplog):
    caplog.set_level("WARNING", logger="kadence._instance")
    async with WorkflowEnvironment(workflows=[Tally]) as env:
        handle = await env.client.start_workflow(Tally, id="tally-1", task_queue="q")
        await handle.signal(Tally.add, "five")  # does not fit `amount: int`: dropped, warned
        await handle.signal(Tally.add, 5)
        assert await handle.result(timeout=10) == 5
        for _ in range(3):  # a closed run's queries replay its whole history
            assert await handle.query(Tally.value) == 5
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in dropped]


@activity.defn
async def always_down(n: int) -> int:
    raise ConnectionError("still down")


@workflow.defn
class Hopeless:
    @workflow.run
    async def run(self) -> int:
        return await workflow.execute_activity(always_down, 1, start_to_close_timeout=timedelta(seconds=5))


async def test_an_activity_that_always_fails_stops_at_the_environment_s_attempt_limit_naming_it():
    async with WorkflowEnvironment(workflows=[Hopeless], activities=[always_down], max_activity_attempts=7) as env:
        with pytest.raises(ActivityAttemptLimitError, match=r"activity 'always_down' .* reached attempt 8") as info:
            await env.client.execute_workflow(Hopeless, id="hopeless-1", task_queue="q")
    assert info.value.activity_type == "always_down" and info.value.attempt == 8


@workflow.defn
class Rounds:
    @workflow.run
    async def run(self, left: int) -> int:
        workflow.upsert_search_attributes({"Left": str(left)})
        if left > 0:
            workflow.continue_as_new(left - 1)
        return left


async def test_describe_of_an_earlier_run_reads_its_history_for_what_its_state_no_longer_holds():
    async with WorkflowEnvironment(workflows=[Rounds]) as env:
        handle = await env.client.start_workflow(Rounds, 1, id="rounds-1", task_queue="q", memo={"who": "ops"})
        first_run = handle.run_id
        assert await env.client.get_workflow_handle("rounds-1").result(timeout=10) == 0
        first = env.client.get_workflow_handle("rounds-1", run_id=first_run)
        d = await first.describe()
        events = await first.history(raw=True)
    assert d.status == "continued_as_new" and d.workflow_type == "Rounds" and d.task_queue == "q"
    assert d.history_length == len(events) > 3
    assert d.history_size_bytes == sum(len(serde.encode("HistoryEvent", e)) for e in events)
    assert d.start_time is not None and d.close_time is not None
    assert d.continued_run_id not in (None, first_run)
    assert d.search_attributes == {"Left": "1"} and d.memo == {"who": "ops"}


async def test_describe_is_typed_and_its_dict_form_still_reads_with_a_deprecation_warning():
    async with WorkflowEnvironment(workflows=[Rounds]) as env:
        handle = await env.client.start_workflow(Rounds, 0, id="rounds-2", task_queue="q")
        assert await handle.result(timeout=10) == 0
        d = await handle.describe()
    assert isinstance(d, WorkflowExecutionDescription)
    assert d.status is WorkflowExecutionStatus.COMPLETED and d.status == "completed"
    assert isinstance(d.start_time, datetime) and d.close_time >= d.start_time
    assert d.result == 0 and d.failure is None and d.pending_activities == []
    assert d.to_dict()["status"] == "completed" and d.to_dict()["start_time"] == d.start_time.isoformat(
        timespec="milliseconds"
    )
    with pytest.warns(DeprecationWarning, match="WorkflowExecutionDescription"):
        assert d["status"] == "completed"
    with pytest.warns(DeprecationWarning):
        assert d.get("last_task_failure") is None
    with pytest.warns(DeprecationWarning):
        assert set(d) == set(d.to_dict()) and dict(d.items()) == d.to_dict()


@workflow.defn
class Desk:
    def __init__(self) -> None:
        self.released = False
        self.notes: list[str] = []

    @workflow.signal
    def release(self) -> None:
        self.released = True

    @workflow.update
    async def file(self, note: str) -> int:
        await workflow.wait_condition(lambda: self.released)
        self.notes.append(note)
        return len(self.notes)

    @file.validator
    def check_file(self, note: str) -> None:
        if not note:
            raise ValueError("an empty note")

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: len(self.notes) >= 1)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.notes


async def test_start_update_returns_once_accepted_and_a_second_handle_reads_its_result_from_history():
    async with WorkflowEnvironment(workflows=[Desk]) as env:
        handle = await env.client.start_workflow(Desk, id="desk-1", task_queue="q")
        with pytest.raises(WorkflowUpdateFailedError, match="rejected") as info:
            await handle.start_update(Desk.file, "")
        assert info.value.rejected
        up = await handle.start_update(Desk.file, "first", id="file-1")  # accepted; its handler waits
        assert up.id == "file-1"
        other = env.client.get_workflow_handle("desk-1").get_update_handle("file-1")
        waiting = asyncio.ensure_future(other.result(timeout=30))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # accepted, not completed: the handler waits for the release
        await handle.signal(Desk.release)
        assert await up.result(timeout=10) == 1
        assert await waiting == 1  # from the history, by ID only
        assert await handle.result(timeout=10) == ["first"]
        done = await handle.start_update(Desk.file, "first", id="file-1", wait_for_stage=WorkflowUpdateStage.COMPLETED)
        assert await done.result() == 1  # the same update ID: the same outcome, not a second one
