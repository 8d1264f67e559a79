"""An activity's retry backoff stays at its cap however many attempts failed: past about attempt
1,025 the float power of the default policy overflowed, the transition raised, and the activity
was never retried again (found by ``kadence.testing``, whose virtual clock reaches such attempts
in a second)."""

from __future__ import annotations

from kadence.processors.activities import DEFAULT_RETRY, _retry_delay


def _activity(attempt: int, policy: dict | None = None) -> dict:
    return {"attempt": attempt, "options": {"retry_policy": policy}, "first_scheduled_ms": 0}


def test_the_default_policy_doubles_from_one_second_up_to_its_cap():
    failure = {"type": "RuntimeError", "non_retryable": False}
    delays = [_retry_delay(_activity(n), failure, ts=0) for n in (1, 2, 3, 8, 9)]
    assert delays == [1000, 2000, 4000, 100_000, 100_000]


def test_attempts_past_the_float_range_wait_the_cap():
    failure = {"type": "RuntimeError", "non_retryable": False}
    assert _retry_delay(_activity(1025), failure, ts=0) == 100_000
    assert _retry_delay(_activity(5000), failure, ts=0) == 100_000
    capped = {**DEFAULT_RETRY, "maximum_interval_ms": 30_000, "backoff_coefficient": 3.5}
    assert _retry_delay(_activity(100_000, capped), failure, ts=0) == 30_000
