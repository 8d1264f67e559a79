"""Shadow replay's bounded sample (``kadence._shadow``): per workflow type only the latest runs
are held, the older ones dropped as newer ones start; a tombstone deletes its event."""

from __future__ import annotations

from kadence import Replayer
from kadence._shadow import ShadowReplay
from kadence.topics import KafkaConfig, serde
from tests.replay.workflows_v1 import Fees


class _Msg:
    def __init__(self, key: str, value: bytes | None) -> None:
        self._key, self._value = key.encode(), value

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def _started(wf: str, run: str, wtype: str = "Fees") -> _Msg:
    event = {
        "event_id": f"{wf}-{run}-1",
        "aggregate_key": wf,
        "run_id": run,
        "seq": 1,
        "timestamp_ms": 1,
        "attributes": ("WorkflowExecutionStarted", {"workflow_type": wtype, "task_queue": "q", "input": b"[1]"}),
    }
    return _Msg(f"{wf}/{run}/1", serde.encode("HistoryEvent", event))


def test_only_the_latest_runs_of_each_type_are_held():
    shadow = ShadowReplay(KafkaConfig(namespace="ns"), Replayer(workflows=[Fees]), per_type=2)
    for i in range(5):
        shadow._take(_started(f"wf-{i}", f"r{i}"))
    shadow._take(_started("other-0", "o0", "Other"))
    assert list(shadow._by_type["Fees"]) == [("wf-3", "r3"), ("wf-4", "r4")]
    assert set(shadow._runs) == {("wf-3", "r3"), ("wf-4", "r4"), ("other-0", "o0")}
    shadow._take(_Msg("wf-4/r4/1", None))  # a tombstone (archival)
    assert shadow._runs[("wf-4", "r4")] == {}
