"""Replay recorded histories against workflow code, to catch non-determinism before a deploy.

    from kadence import Replayer
    Replayer(workflows=[OrderFulfilment]).replay_file("tests/replay/order-1.json")

Histories come from JSON files (``kadence history ID > file.json``, or the gateway's history
endpoint) or straight from the history topic (``kadence replay --from-topic``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kadence.topics.errors import DefinitionError, NonDeterminismError, SchemaError
from kadence.topics.history_json import event_from_json
from kadence.topics.payload import JsonConverter, PayloadConverter

from ._definitions import failure_types
from ._instance import WorkflowInfo, WorkflowInstance

__all__ = ["ReplayResult", "Replayer"]


@dataclass(frozen=True)
class ReplayResult:
    workflow_id: str
    run_id: str
    workflow_type: str
    events: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Replayer:
    def __init__(
        self,
        *,
        workflows: Iterable[type],
        converter: PayloadConverter | None = None,
        interceptors: Iterable[Any] = (),
        workflow_failure_exception_types: Iterable[type[BaseException]] = (),
    ) -> None:
        #: the workers' workflow interceptors, when they change what the code does
        self.interceptors = tuple(interceptors)
        #: the workers' ``workflow_failure_exception_types`` (what failed a run, not its task)
        self.failure_types = failure_types(workflow_failure_exception_types, "Replayer")
        self._defs = {}
        for w in workflows:
            d = getattr(w, "__kadence_workflow__", None)
            if d is None:
                raise DefinitionError(f"{w!r} is not a @workflow.defn class")
            self._defs[d.name] = d
        self.converter = converter or JsonConverter()

    @property
    def workflow_types(self) -> frozenset[str]:
        """The names of the workflow types this replayer has code for."""
        return frozenset(self._defs)

    def replay(self, events: list[dict[str, Any]]) -> ReplayResult:
        """Replay one run's events (record form, oldest first); raises ``NonDeterminismError``."""
        if not events or events[0]["attributes"][0] != "WorkflowExecutionStarted":
            raise SchemaError("a history starts with WorkflowExecutionStarted")
        started = events[0]["attributes"][1]
        wtype = started["workflow_type"]
        defn = self._defs.get(wtype)
        if defn is None:
            raise DefinitionError(f"workflow type {wtype!r} is not among the replayer's workflows")
        wf, run_id = events[0]["aggregate_key"], events[0]["run_id"]
        inst = WorkflowInstance(
            defn,
            WorkflowInfo(wf, run_id, wtype, started["task_queue"]),
            self.converter,
            self.interceptors,
            self.failure_types,
        )
        try:
            inst.apply(sorted(events, key=lambda e: e["seq"]), -1)
            inst.finish_replay()
        finally:
            inst.discard()
        return ReplayResult(wf, run_id, wtype, len(events))

    def replay_json(self, exported: list[Any] | dict[str, Any]) -> ReplayResult:
        """A history as ``kadence history`` prints it (a list of events) or as the gateway
        returns it (``{"events": [...]}``)."""
        items = exported["events"] if isinstance(exported, dict) else exported
        return self.replay([event_from_json(e, self.converter) for e in items])

    def replay_file(self, path: str | Path) -> ReplayResult:
        return self.replay_json(json.loads(Path(path).read_text()))

    def check(self, histories: Iterable[list[dict[str, Any]]]) -> list[ReplayResult]:
        """Replay many runs; collect failures instead of stopping at the first."""
        results = []
        for events in histories:
            head = events[0]
            try:
                results.append(self.replay(events))
            except NonDeterminismError as exc:
                results.append(
                    ReplayResult(
                        head["aggregate_key"],
                        head["run_id"],
                        head["attributes"][1].get("workflow_type", "?"),
                        len(events),
                        str(exc),
                    )
                )
        return results
