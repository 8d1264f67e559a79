"""A rolling upgrade on one namespace (issue 20): the previous release's processor and this
release's, side by side, with this release pinned to the previous schema version
(``KADENCE_SCHEMA_WRITE_VERSION``), then a rollback to the previous release alone, then the pin
lifted. The order is docs/upgrading.md's.

The previous release is ``tests.support.previous_release``: today's code with the previous
schema version as its newest (it cannot read a record of the current version). Each workflow
here lives through every phase: its state and history are written by one release and restored
by the other when partitions move."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kadence import Client, Worker, workflow
from kadence.schemas import CURRENT_VERSION
from kadence.topics import serde
from tests.support.codecs import pin_write_version
from tests.support.metrics import sample_sum_async
from tests.support.net import free_port

from .conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
Q = "upgrade"
PREVIOUS = CURRENT_VERSION - 1
OLD = "tests.support.previous_release"


@workflow.defn(name="Tally")
class Tally:
    def __init__(self):
        self.seen: list[str] = []

    @workflow.signal
    def add(self, value: str) -> None:
        self.seen.append(value)

    @workflow.query
    def count(self) -> int:
        return len(self.seen)

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: len(self.seen) == 4)
        return "+".join(self.seen)


@pytest.fixture
def pin(monkeypatch):
    """``pin(version)``: this process (client and worker) writes ``version`` (None: the current
    one); codecs made before are dropped, so connect clients and workers after calling it. The
    codecs are made again unpinned after the test, whatever happened."""

    yield lambda version: pin_write_version(monkeypatch, version)
    pin_write_version(monkeypatch, None)


async def _signal_and_see(handles, value: str, count: int) -> None:
    for h in handles:
        await h.signal("add", value)

    async def all_seen() -> bool:
        return all([await h.query("count") == count for h in handles])

    await wait_until(all_seen, 60, f"every run to have {count} signals")


def test_the_previous_release_cannot_read_what_this_release_writes_unpinned():
    """The premise (and the emulation's check): without the pin, an instance of the previous
    release refuses this release's records."""
    data = bytes((serde.MAGIC, CURRENT_VERSION)) + b"\x00"
    code = (
        f"import {OLD}\n"
        "from kadence.topics import serde\n"
        "from kadence.topics.errors import SchemaError\n"
        "try:\n"
        f"    serde.decode('WorkflowState', {data!r})\n"
        "except SchemaError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"unknown schema version {CURRENT_VERSION}" in out.stdout, out.stdout


async def test_old_and_new_processors_side_by_side_then_rollback_then_the_pin_lifted(kafka_config, processors, pin):
    old_port, new_port, last_port = free_port(), free_port(), free_port()
    processors.start("old", env={"KADENCE_PROCESSOR_METRICS_PORT": str(old_port)}, module=OLD)
    # the new release's client and worker, pinned from the first record they write
    pin(PREVIOUS)
    client = await Client.connect(config=kafka_config)
    try:
        async with Worker(client, task_queue=Q, workflows=[Tally]):
            handles = [await client.start_workflow("Tally", id=f"tally-{i}", task_queue=Q) for i in range(12)]
            await _signal_and_see(handles, "a", 1)  # the previous release alone

            # a pinned instance of this release joins: the partitions are shared
            processors.start(
                "new",
                env={"KADENCE_PROCESSOR_METRICS_PORT": str(new_port), serde.WRITE_VERSION_ENV: str(PREVIOUS)},
            )
            await wait_until(
                lambda: sample_sum_async(new_port, "kadence_processor_restore_seconds_count"),
                60,
                "the new release's instance to restore its share of the partitions",
            )
            before = await sample_sum_async(old_port, "kadence_processor_commands_total")
            await _signal_and_see(handles, "b", 2)
            assert await sample_sum_async(new_port, "kadence_processor_commands_total") > 0
            assert await sample_sum_async(old_port, "kadence_processor_commands_total") > before

            # rollback: the new instance goes; the previous release restores what it wrote
            restored = await sample_sum_async(old_port, "kadence_processor_restore_seconds_count")
            processors.stop("new")

            async def restored_more() -> bool:
                return await sample_sum_async(old_port, "kadence_processor_restore_seconds_count") > restored

            await wait_until(
                restored_more,
                60,
                "the previous release to take the partitions back",
            )
            await _signal_and_see(handles, "c", 3)
            assert await sample_sum_async(old_port, "kadence_processor_dead_letters_total") == 0
    finally:
        await client.close()

    # the upgrade completed: only this release, the pin lifted everywhere
    processors.start("last", env={"KADENCE_PROCESSOR_METRICS_PORT": str(last_port)})
    processors.stop("old")
    pin(None)
    client = await Client.connect(config=kafka_config)
    try:
        async with Worker(client, task_queue=Q, workflows=[Tally]):
            handles = [client.get_workflow_handle(h.id, run_id=h.run_id) for h in handles]
            for h in handles:
                await h.signal("add", "d")
            assert [await h.result(timeout=60) for h in handles] == ["a+b+c+d"] * len(handles)
        assert await sample_sum_async(last_port, "kadence_processor_dead_letters_total") == 0
    finally:
        await client.close()
    for name in ("old", "new", "last"):
        for log in Path(processors.logdir).glob(f"processor-{name}-*.log"):
            text = log.read_text()
            assert not re.search(r"[1-9][0-9]* quarantined|cannot decode", text), (log.name, text[-3000:])
