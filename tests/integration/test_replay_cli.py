"""`kadence replay` checks histories from the real history topic and from exported files."""

import json

from kadence import Worker
from tests.replay.workflows_v1 import Fees, charge
from tests.support.cli import kadence


async def test_replay_from_topic_passes_for_the_same_code_and_names_the_divergence_otherwise(
    client, processors, kafka_config, tmp_path
):
    processors.start()
    async with Worker(client, task_queue="q", workflows=[Fees], activities=[charge]):
        handles = [await client.start_workflow(Fees, 100 * i, id=f"fees-{i}", task_queue="q") for i in range(3)]
        for h in handles:
            await h.result(timeout=60)
    rc, out, err = await kadence(kafka_config, "replay", "--module", "tests.replay.workflows_v1", "--from-topic")
    assert rc == 0, err
    assert "3 histories replayed, 0 failed" in out
    rc, out, err = await kadence(kafka_config, "replay", "--module", "tests.replay.workflows_unsafe", "--from-topic")
    assert rc == 1
    assert "history event 4 is ActivityTaskScheduled(activity_type='charge'" in err
    # a history exported with `kadence history` replays from its file
    rc, out, err = await kadence(kafka_config, "history", "fees-1")
    path = tmp_path / "fees-1.json"
    path.write_text(out)
    assert json.loads(out)[-1]["type"] == "WorkflowExecutionCompleted"
    rc, out, err = await kadence(kafka_config, "replay", "--module", "tests.replay.workflows_v1", str(path))
    assert rc == 0 and "1 histories replayed, 0 failed" in out


async def test_shadow_replay_follows_live_histories_failing_an_unsafe_build_and_passing_a_patched_one(
    client, processors, kafka_config, tmp_path
):
    """``kadence replay --from-topic --follow``: two candidate builds follow the history topic
    while v1 runs; a run that starts after they began is replayed as its history grows. The
    build without ``workflow.patched`` fails it with the diverging event and exits 1; the
    patched build passes every run and exits 0 (docs/upgrading.md, "Shadow replay")."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys
    import time

    processors.start()
    env = {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": kafka_config.bootstrap, "KADENCE_NAMESPACE": kafka_config.namespace}
    async with Worker(client, task_queue="q", workflows=[Fees], activities=[charge]):
        await (await client.start_workflow(Fees, 100, id="fees-before", task_queue="q")).result(timeout=60)
        followers = {}
        for build in ("unsafe", "patched"):
            out, err = (open(tmp_path / f"{build}.{x}", "w") for x in ("out", "err"))
            module = f"tests.replay.workflows_{build}"
            followers[build] = subprocess.Popen(
                [sys.executable, "-m", "kadence.cli", "replay", "--module", module, "--from-topic", "--follow"],
                env=env,
                stdout=out,
                stderr=err,
            )

        def text(build: str) -> str:
            return (tmp_path / f"{build}.out").read_text() + (tmp_path / f"{build}.err").read_text()

        async def until(predicate, what: str) -> None:
            deadline = time.monotonic() + 90
            while not predicate():
                assert time.monotonic() < deadline, (
                    f"timed out waiting for {what}: {text('unsafe')} | {text('patched')}"
                )
                await asyncio.sleep(0.2)

        await until(lambda: all("following the history topic" in text(b) for b in followers), "the samples")
        assert "FAIL Fees fees-before" in text("unsafe") and "ok   Fees fees-before" in text("patched")
        await (await client.start_workflow(Fees, 200, id="fees-live", task_queue="q")).result(timeout=60)
        await until(lambda: "FAIL Fees fees-live" in text("unsafe"), "the unsafe build to fail the live run")
        await until(lambda: "ok   Fees fees-live" in text("patched"), "the patched build to pass the live run")
    codes = {}
    for build, proc in followers.items():
        proc.send_signal(signal.SIGINT)
        codes[build] = proc.wait(30)
    assert codes == {"unsafe": 1, "patched": 0}, (codes, text("unsafe"), text("patched"))
    live_failure = next(line for line in text("unsafe").splitlines() if "FAIL Fees fees-live" in line)
    assert "history event" in live_failure and "ActivityTaskScheduled" in live_failure
    assert "FAIL" not in text("patched")
    assert "shadow replay: Fees:" in text("patched")
