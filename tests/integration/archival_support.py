"""Helpers of the archival tests: closed runs to archive, the live history as raw bytes, and the
archiver as a thread or as a process that can be SIGKILLed."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from kadence.connectors.archiver import Archiver, ArchiverConfig
from kadence.topics import Catalogue, KafkaConfig
from kadence.topics.archive import ArchiveStoreConfig
from kadence.topics.scan import scan


async def closed_runs(client, n: int, prefix: str, *, queue: str = "q", chunk: int = 100) -> list[tuple[str, str]]:
    """Start ``n`` workflows and terminate them: (workflow_id, run_id) of ``n`` closed runs."""
    runs = []
    for lo in range(0, n, chunk):
        handles = await asyncio.gather(
            *(
                client.start_workflow("Trivial", i, id=f"{prefix}-{i}", task_queue=queue)
                for i in range(lo, min(n, lo + chunk))
            )
        )
        await asyncio.gather(*(h.terminate(reason="closed for the archival test") for h in handles))
        runs += [(h.id, h.run_id) for h in handles]
    return runs


def live_history(config: KafkaConfig) -> dict[tuple[str, str], list[bytes]]:
    """(workflow_id, run_id) -> the Kafka values of the run's live events in seq order
    (tombstones delete); runs with no live event are left out."""
    runs: dict = collections.defaultdict(dict)
    for msg in scan(config, Catalogue(config).history):
        wf, run_id, seq = msg.key().decode().rsplit("/", 2)
        if msg.value() is None:
            runs[(wf, run_id)].pop(int(seq), None)
        else:
            runs[(wf, run_id)][int(seq)] = msg.value()
    return {k: [v[s] for s in sorted(v)] for k, v in runs.items() if v}


def archiver_config(config: KafkaConfig, directory: Path, **kw) -> ArchiverConfig:
    return ArchiverConfig(
        kafka=config,
        store=kw.pop("store_config", ArchiveStoreConfig(directory=str(directory))),
        redis_url=os.environ["KADENCE_REDIS_URL"],
        **kw,
    )


class ArchiverThread:
    """An in-process archiver, stopped (and its errors raised) on exit."""

    def __init__(self, archiver: Archiver):
        self.archiver = archiver
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.archiver.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test
            self.error = exc

    def __enter__(self) -> Archiver:
        self.thread.start()
        return self.archiver

    def __exit__(self, *exc):
        self.archiver.stop()
        self.thread.join(30)
        assert not self.thread.is_alive(), "archiver did not stop"
        if self.error is not None:
            raise self.error


class ArchiverProc:
    """`kadence archive run` as a child process (SIGKILL-able); logs in ``logdir``."""

    def __init__(self, config: KafkaConfig, directory: Path, logdir: Path, *extra: str):
        self.config, self.directory, self.logdir, self.extra = config, directory, logdir, extra
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.logdir / f"archiver-{self.starts}.log", "w")
        env = {
            **os.environ,
            "KADENCE_KAFKA_BOOTSTRAP": self.config.bootstrap,
            "KADENCE_NAMESPACE": self.config.namespace,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kadence.cli", "archive", "run", "--dir", str(self.directory), *self.extra],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logdir.glob("archiver-*.log")))
