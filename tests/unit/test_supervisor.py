"""``kadence dev``'s supervisor starts a child that exits again, with a growing delay, and stops
every child on ``stop()`` (real child processes; the checks are driven by hand)."""

import sys
import time

import pytest

from kadence.cli.supervisor import Supervisor


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def _manual(lines):
    # check_every_s large: the watcher thread never runs a pass; the test calls check()
    return Supervisor(first_delay_s=0.1, max_delay_s=0.4, stable_s=60, check_every_s=3600, echo=lines.append)


def test_a_child_that_exits_is_started_again_with_a_doubling_delay():
    lines = []
    sup = _manual(lines)
    child = sup.start("flaky", [sys.executable, "-c", "import sys; sys.exit(75)"])
    try:
        for restarts in range(1, 5):
            _wait(lambda: child.proc.poll() is not None)
            sup.check()  # notes the exit
            assert child.restart_at is not None
            _wait(lambda: time.monotonic() >= child.restart_at)
            sup.check()  # starts it again
            assert child.restarts == restarts
        assert list(child.exits) == [75, 75, 75, 75]
        delays = [line.split(" again in ")[1] for line in lines if "exited" in line]
        assert delays == ["0.1 s", "0.2 s", "0.4 s", "0.4 s"]  # doubling, capped at max_delay_s
        assert lines[0] == "==> flaky exited with status 75; starting it again in 0.1 s"
        assert lines[1] == "==> flaky started again (restart 1)"
    finally:
        sup.stop()


def test_the_delay_goes_back_to_the_first_after_a_stable_run():
    lines = []
    sup = _manual(lines)
    child = sup.start("once", [sys.executable, "-c", "import sys; sys.exit(1)"])
    try:
        child.delay_s = 0.4  # as after several quick exits
        child.started_at -= 120  # it had been up for two minutes
        _wait(lambda: child.proc.poll() is not None)
        sup.check()
        assert child.restart_at - time.monotonic() <= 0.1 + 0.05
        assert child.delay_s == 0.2  # first delay used, then doubled for the next exit
    finally:
        sup.stop()


def test_stop_ends_every_child_and_nothing_is_started_after_it():
    lines = []
    sup = _manual(lines)
    sleeper = sup.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    quitter = sup.start("quitter", [sys.executable, "-c", "pass"])
    _wait(lambda: quitter.proc.poll() is not None)
    started = time.monotonic()
    sup.stop(timeout=10)
    assert time.monotonic() - started < 10  # SIGTERM ended the sleeper
    assert sleeper.proc.returncode is not None
    sup.check()
    assert quitter.restarts == 0 and quitter.restart_at is None and lines == []


def test_the_watcher_thread_restarts_on_its_own():
    lines = []
    sup = Supervisor(first_delay_s=0.05, max_delay_s=0.05, check_every_s=0.05, echo=lines.append)
    child = sup.start("flaky", [sys.executable, "-c", "pass"])
    try:
        _wait(lambda: child.restarts >= 2)
    finally:
        sup.stop()
    assert any(line == "==> flaky started again (restart 2)" for line in lines)


def test_two_children_cannot_share_a_name():
    sup = _manual([])
    sup.start("a", [sys.executable, "-c", "pass"])
    try:
        with pytest.raises(ValueError):
            sup.start("a", [sys.executable, "-c", "pass"])
    finally:
        sup.stop()


def test_children_die_with_a_killed_supervisor():
    """SIGKILL of the supervising process leaves no orphan (it would hold the slot's group
    membership against its replacement)."""
    import os
    import signal
    import subprocess

    script = (
        "import sys, time\n"
        "from kadence.cli.supervisor import Supervisor\n"
        "sup = Supervisor(echo=lambda line: None)\n"
        "child = sup.start('sleeper', [sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)

    def gone():
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return True
        # a zombie until its (dead) parent is reaped by init: check its state
        with open(f"/proc/{child_pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"

    _wait(gone)


def test_a_child_keeps_only_its_last_exit_statuses():
    from kadence.cli.supervisor import EXITS_KEPT, Child

    child = Child("x", [])
    for status in range(EXITS_KEPT + 50):
        child.exits.append(status)
    assert list(child.exits) == list(range(50, EXITS_KEPT + 50))


def test_a_child_that_exits_with_a_final_status_is_not_started_again():
    """``kadence projections run`` exits 78 on a refused login or a missing ACL: restarting it
    would fail the same way, so its supervisor leaves it stopped and says why."""
    lines = []
    sup = Supervisor(
        first_delay_s=0.1, max_delay_s=0.4, stable_s=60, check_every_s=3600, echo=lines.append,
        final_statuses=frozenset({78}),
    )  # fmt: skip
    child = sup.start("projections app", [sys.executable, "-c", "import sys; sys.exit(78)"])
    try:
        _wait(lambda: child.proc.poll() is not None)
        sup.check()
        assert child.given_up and child.restart_at is None
        time.sleep(0.2)
        sup.check()
        assert child.restarts == 0 and list(child.exits) == [78]
        assert lines == ["==> projections app exited with status 78: a setting to fix; not starting it again"]
    finally:
        sup.stop(timeout=5)
