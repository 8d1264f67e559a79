"""Recorded histories replay against workflow code: safe changes pass, unsafe ones are named."""

from pathlib import Path

import pytest

from kadence import NonDeterminismError, Replayer
from tests.unit.engine_harness import Driver

from .workflows_v1 import Fees, FeesDeprecated, FeesPatched, FeesUnsafe

V1 = Path(__file__).parent / "fees_v1.json"


def test_the_recorded_history_replays_against_the_code_that_wrote_it():
    result = Replayer(workflows=[Fees]).replay_file(V1)
    assert result.ok and result.workflow_type == "Fees" and result.events >= 8


def test_a_change_guarded_by_patched_replays_old_histories():
    assert Replayer(workflows=[FeesPatched]).replay_file(V1).ok


def test_new_runs_of_the_patched_code_take_the_new_path_and_record_a_marker():
    d = Driver(FeesPatched, lambda task, args: ("ok", args[0] // 100 if task["activity_type"] == "fee" else args[0]))
    d.h.start("wf", "Fees", [1000])
    d.run()
    from kadence.topics.payload import JsonConverter

    assert JsonConverter().from_bytes(d.state()["result"]) == 1010
    kinds = [e["attributes"][0] for e in d.h.events]
    assert "MarkerRecorded" in kinds
    # and that new history replays with the patched code and, later, with the deprecated patch
    events = d.h.events
    assert Replayer(workflows=[FeesPatched]).replay(events).ok
    assert Replayer(workflows=[FeesDeprecated]).replay(events).ok


def test_the_same_change_without_patched_is_caught_naming_the_diverging_event():
    with pytest.raises(NonDeterminismError, match=r"history event 4 is ActivityTaskScheduled\(activity_type='charge'"):
        Replayer(workflows=[FeesUnsafe]).replay_file(V1)


def test_extra_commands_at_the_end_of_a_history_are_caught():
    d = Driver(Fees)
    d.h.start("wf", "Fees", [5])
    d.step()  # the first workflow task only: history ends with ActivityTaskScheduled(charge)
    d.step()
    truncated = [e for e in d.h.events if e["seq"] <= 4]
    with pytest.raises(NonDeterminismError):
        Replayer(workflows=[FeesUnsafe]).replay(truncated)
