"""The documentation's runnable examples run (against the real broker)."""

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, kafka_bootstrap: str, timeout: float = 180) -> str:
    """Run docs/examples/``name`` against the broker; its stdout (it must exit 0)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples" / name)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "KADENCE_KAFKA_BOOTSTRAP": kafka_bootstrap},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_hello_example_prints_its_result(kafka_bootstrap):
    stdout = run_example("hello.py", kafka_bootstrap)
    assert "result: HELLO, KAFKA!" in stdout
    assert "execute: HELLO, AGAIN!" in stdout
    assert "WorkflowExecutionCompleted" in stdout
    assert "eager workflow tasks: 2" in stdout


def test_make_dev_once_runs_the_sample_and_exits_zero(kafka_bootstrap):
    """What `KADENCE_DEV_ONCE=1 make dev` runs inside the dev stack."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "KADENCE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "KADENCE_DEV_ONCE": "1",
        "KADENCE_NAMESPACE": f"devonce{uuid.uuid4().hex[:6]}",
        "KADENCE_GATEWAY_PORT": str(port),
    }
    out = subprocess.run(
        [sys.executable, "-m", "kadence.cli", "--log-level", "warning", "dev"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert '"charged_cents": 6500' in out.stdout
    assert "WorkflowExecutionCompleted" in out.stdout and "==> history (20 events)" in out.stdout
    # the projections run too, so `kadence list` shows the sample (issue 17)
    assert "==> visibility (`kadence list`): order-" in out.stdout and "OrderFulfilment  completed" in out.stdout, (
        out.stdout[-2000:]
    )
    # the console's URL, and every process's metrics (issue 17)
    assert f"==> console http://127.0.0.1:{port}/ui" in out.stdout
    metrics = next(line for line in out.stdout.splitlines() if line.startswith("==> metrics: "))
    for name in ("gateway", "processor", "timer service", "worker", "projections"):
        assert f"{name} http://127.0.0.1:" in metrics, metrics


def test_visibility_example_lists_its_runs(kafka_bootstrap):
    stdout = run_example("visibility.py", kafka_bootstrap, timeout=240)
    assert "even: ['tagged-0', 'tagged-2', 'tagged-4']" in stdout
    assert "counts: {'total': 6, 'by_type': {'Tagged': 6}, 'by_status': {'completed': 6}}" in stdout


def test_local_activities_example_runs_them_in_one_workflow_task(kafka_bootstrap):
    stdout = run_example("local_activities.py", kafka_bootstrap)
    assert "total: 13" in stdout
    assert stdout.count("MarkerRecorded") == 3 and "ActivityTaskScheduled" not in stdout
    assert "workflow tasks: 1 local activities: 3" in stdout


def test_rate_limits_example_paces_the_limited_run_only(kafka_bootstrap):
    stdout = run_example("rate_limits.py", kafka_bootstrap)
    lines = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)
    limited = float(lines["limited"].split(" in ")[1].rstrip(" s"))
    unlimited = float(lines["unlimited"].split(" in ")[1].rstrip(" s"))
    # 20 at 5 a second: a second's worth (5) at once after a quiet spell, then 15 at 5/s = 3 s
    assert 2.8 <= limited <= 5.0, stdout
    assert unlimited < 1.0, stdout
    assert "limits now: {'mail': False}" in stdout


def test_schema_registry_example_reads_history_with_the_registrys_deserializer(kafka_bootstrap):
    assert os.environ.get("KADENCE_DEV_SCHEMA_REGISTRY_URL"), "run under scripts/devstack.py run (make test)"
    stdout = run_example("schema_registry.py", kafka_bootstrap)
    assert stdout.count("BACKWARD_TRANSITIVE") == 3, stdout
    assert "result: Hello, registry!" in stdout
    events = [line.split()[1:] for line in stdout.splitlines() if line.startswith("history:")]
    assert events[0] == ["hello-registry", "1", "WorkflowExecutionStarted"], stdout
    assert events[-1][2] == "WorkflowExecutionCompleted", stdout


def test_concurrency_limits_example_never_exceeds_its_limits(kafka_bootstrap):
    stdout = run_example("concurrency_limits.py", kafka_bootstrap)
    lines = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)
    # 8 acme imports, 3 hold the slots: acme-7 is the fifth in line
    assert lines["import-acme-7"] == "waiting for a slot of tenant=acme: 3 of 3 in use, 4 waiting before it", stdout
    assert lines["stored"] == "12"
    # two tenants of 3 slots: 6 at most (fewer when a loaded machine staggers the parse steps)
    assert 2 <= int(lines["most imports at once"].split()[0]) <= 6, stdout
    assert lines["most uploads at once"] in ("1", "2"), stdout


def test_key_rate_limits_example_delays_and_admits_every_signup(kafka_bootstrap):
    stdout = run_example("key_rate_limits.py", kafka_bootstrap)
    lines = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)
    assert lines["signup-9 delayed"].startswith("its code runs at 20"), stdout
    assert lines["welcomed"] == "10", stdout
    # 10 signups at 2 a second: the last is admitted 4 s after the first two
    assert float(lines["took"].split()[0]) >= 4.0, stdout
    shown = sorted(line for line in stdout.splitlines() if line.startswith("limit: "))
    assert shown == ["limit: api=mailer 3 per 1s, admitted 10", "limit: signup=eu 2 per 1s, admitted 10"], stdout


def test_debounce_example_runs_once_with_the_last_save(kafka_bootstrap):
    stdout = run_example("debounce.py", kafka_bootstrap)
    lines = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)
    assert lines["run IDs"] == "1", stdout
    assert lines["result"] == "reindexed version 20", stdout
    assert lines["history"] == "WorkflowExecutionStarted + 19 x WorkflowStartDebounced", stdout


def test_priority_example_runs_the_urgent_task_first_and_the_small_tenant_in_turn(kafka_bootstrap):
    stdout = run_example("priority.py", kafka_bootstrap)
    waiting = int(stdout.split("with ")[1].split(" big files still waiting")[0])
    assert waiting > 200, stdout  # the level-1 check did not wait behind the level-5 export
    done_after = int(stdout.split("files were done after ")[1].split(" files")[0])
    assert done_after < 60, stdout  # every other turn, not after the big tenant's 300


def test_schedules_example_runs_backfills_triggers_and_describes(kafka_bootstrap):
    stdout = run_example("schedules.py", kafka_bootstrap)
    assert "backfilled: 3" in stdout and "paused: True - enough for the example" in stdout, stdout
    assert "runs started: 7" in stdout, stdout
    runs = [line.split() for line in stdout.splitlines() if line.startswith("  ")]
    assert len(runs) == 7 and all(status == "completed" for _, _, status in runs), stdout
    assert len({wf for _, wf, _ in runs}) == 7  # one ID per time


def test_streams_example_reads_the_accepted_attempt_once_and_resumes(kafka_bootstrap):
    stdout = run_example("streams.py", kafka_bootstrap)
    lines = [line.split(": ", 1)[1] for line in stdout.splitlines() if line.split(":")[0].isdigit()]
    assert lines == [
        "started",
        "reading report.pdf (attempt 2)",
        "thinking report.pdf (attempt 2)",
        "writing report.pdf (attempt 2)",
        "done",
    ], stdout
    assert "result: a summary of report.pdf" in stdout, stdout
    assert "-> ['thinking report.pdf (attempt 2)', 'writing report.pdf (attempt 2)', 'done']" in stdout, stdout


def test_standalone_activities_example_gives_both_callers_one_result_and_follows_the_policies(kafka_bootstrap):
    stdout = run_example("standalone_activities.py", kafka_bootstrap)
    assert "result: receipt for order-1001 sent to ann@example.com by attempt 3" in stdout, stdout
    assert "same for both callers: True" in stdout, stdout
    assert "second start refused:" in stdout and "reject_duplicate" in stdout, stdout
    assert "use_existing gives the open run: True" in stdout and "status: running" in stdout, stdout
    assert "export ended: canceled" in stdout, stdout
