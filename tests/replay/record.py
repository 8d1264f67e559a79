"""Regenerate the recorded histories in this folder (run: .venv/bin/python -m tests.replay.record).

They are real histories produced by the engine's state machine and the SDK, exported in the
same JSON form as `kadence history`."""

import json
from pathlib import Path

from kadence.topics.history_json import event_to_json
from tests.unit.engine_harness import Driver

from .workflows_v1 import Fees

HERE = Path(__file__).parent


def record() -> None:
    d = Driver(Fees)
    d.h.start("wf", "Fees", [1000])
    d.run()
    (HERE / "fees_v1.json").write_text(json.dumps([event_to_json(e) for e in d.h.events], indent=1) + "\n")


if __name__ == "__main__":
    record()
