"""The pytest plugin users get with kadence (``kadence.testing.pytest_plugin``): a test file of
their own, run by pytest in a fresh directory, gets a stack, an engine and a client from the
fixtures and runs a workflow on the real broker; with no broker named it starts its own; a stack
that cannot be had is an error, not a skip."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

USER_TEST = textwrap.dedent("""
    import pytest
    from kadence import Worker, activity, workflow

    @activity.defn
    async def shout(text: str) -> str:
        return text.upper()

    @workflow.defn
    class Shout:
        @workflow.run
        async def run(self, text: str) -> str:
            return await workflow.execute_activity(shout, text, start_to_close_timeout=30)

    @pytest.mark.asyncio
    async def test_shout(kadence_client, kadence_stack):
        assert kadence_stack.redis_url
        async with Worker(kadence_client, task_queue="plugin", workflows=[Shout], activities=[shout]):
            assert await kadence_client.execute_workflow(Shout, "hi", id="s-1", task_queue="plugin") == "HI"
""")


def _pytest(tmp_path, env: dict, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_user.py").write_text(USER_TEST)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=strict",
            *args,
            "test_user.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_a_users_test_runs_on_the_stack_it_is_given(tmp_path, kafka_bootstrap):
    out = _pytest(tmp_path, {**os.environ, "KADENCE_KAFKA_BOOTSTRAP": kafka_bootstrap})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 passed" in out.stdout


def test_with_no_broker_named_the_plugin_starts_its_own(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KADENCE_KAFKA_BOOTSTRAP", "KADENCE_REDIS_URL")}
    out = _pytest(tmp_path, env, "--kadence-stack", "devstack")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 passed" in out.stdout


def test_an_external_stack_that_is_not_named_is_an_error_not_a_skip(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KADENCE_KAFKA_BOOTSTRAP", "KADENCE_REDIS_URL")}
    out = _pytest(tmp_path, {**env, "KADENCE_TEST_STACK": "external"})
    assert out.returncode != 0 and "skipped" not in out.stdout
    assert "KADENCE_TEST_STACK=external needs KADENCE_KAFKA_BOOTSTRAP" in out.stdout + out.stderr
