"""Archival drill: 500 closed runs archived while the archiver is SIGKILLed at random points.

Afterwards every run is readable exactly once (from the archive, not also from Kafka), its
archive is byte-equal to the history it had before, and the processor has forgotten its state."""

from __future__ import annotations

import random
import time

from kadence.connectors.archiver import Archiver
from kadence.storage import LocalArchiveStore
from kadence.topics.archive import archive_key, verify_archive
from kadence.topics.state_reader import read_states
from tests.integration.archival_support import ArchiverProc, archiver_config, closed_runs, live_history
from tests.integration.conftest import wait_until

N = 500


async def test_archiver_killed_at_random_points_loses_nothing_and_keeps_nothing_twice(
    client, processors, kafka_config, tmp_path
):
    processors.start()
    ns = kafka_config.namespace
    runs = await closed_runs(client, N, "drill")
    before = live_history(kafka_config)
    assert len(before) == N and all(len(before[r]) == 3 for r in runs)

    directory = tmp_path / "archive"
    store = LocalArchiveStore(directory)
    status = Archiver(archiver_config(kafka_config, directory, retention_s=0.0))  # reads Redis only
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    archiver = ArchiverProc(kafka_config, directory, tmp_path, "--retention", "0s", "--sweep-interval", "0.2s")
    kills = []
    try:
        # kill 1: at a random moment of the start (consuming the history, first sweeps), and at the
        # latest once a few archive files exist (a fast machine archives all 500 within seconds)
        archiver.start()
        early_deadline = time.monotonic() + rng.uniform(0.5, 2.5)
        early_files = rng.randrange(1, 40)
        while time.monotonic() < early_deadline and len(store.list(f"{ns}/")) < early_files:
            time.sleep(0.02)
        archiver.kill()
        kills.append(("early", len(store.list(f"{ns}/"))))
        # kills 2-3: once a random number of further archive files exist, wherever the archiver then is
        done = kills[0][1]
        assert done < N - 170, f"the first kill came too late to be a drill: {kills}"
        for threshold in sorted(rng.sample(range(done + 10, N - 150), 2)):
            archiver.start()
            deadline = time.monotonic() + 90
            while len(store.list(f"{ns}/")) < threshold and archiver.proc.poll() is None:
                assert time.monotonic() < deadline, f"no progress to {threshold} files\n{archiver.logs()}"
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 0.05))
            archiver.kill()
            kills.append((threshold, len(store.list(f"{ns}/"))))
        archiver.start()
        await wait_until(
            lambda: status.status()["due"] == 0 and len(store.list(f"{ns}/")) == N and not live_history(kafka_config),
            120,
            "the archiver to finish after the kills",
        )
        assert archiver.stop() == 0, archiver.logs()
    finally:
        archiver.close()
    print(f"seed {seed}; kills (point, archive files then): {kills}; status after: {status.status()}")
    assert kills[-1][1] < N, f"the last kill came after the work was done: {kills}"

    # exactly once: every run is in the archive and nothing of it is left in Kafka
    assert live_history(kafka_config) == {}
    assert sorted(store.list(f"{ns}/")) == sorted(archive_key(ns, wf, r) for wf, r in runs)
    for wf, run_id in runs:  # byte-equal, count, seq 1..n
        verify_archive(store.get(archive_key(ns, wf, run_id)), ns, wf, run_id, before[(wf, run_id)])
    assert status.status()["held"] == 0
    await wait_until(lambda: not read_states(kafka_config), 60, "every closed run's state to be purged")
    status.close()
