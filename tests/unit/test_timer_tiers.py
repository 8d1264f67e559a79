"""choose_tier: the largest delay tier that does not overshoot the remaining time."""

import pytest

from kadence.processors import choose_tier
from kadence.topics import TIMER_TIERS_MS

SECOND, MINUTE, HOUR, DAY = 1_000, 60_000, 3_600_000, 86_400_000


@pytest.mark.parametrize(
    "remaining, tier",
    [
        (-365 * DAY, "1s"),  # long overdue
        (-1, "1s"),
        (0, "1s"),  # due now
        (1, "1s"),  # sooner than the smallest tier: the smallest
        (999, "1s"),
        (SECOND, "1s"),
        (10 * SECOND - 1, "1s"),
        (10 * SECOND, "10s"),  # exactly a tier's delay: that tier
        (MINUTE - 1, "10s"),
        (MINUTE, "1m"),
        (10 * MINUTE - 1, "1m"),
        (10 * MINUTE, "10m"),
        (HOUR - 1, "10m"),
        (HOUR, "1h"),
        (DAY - 1, "1h"),
        (DAY, "1d"),
        (2 * DAY, "1d"),
        (5 * 365 * DAY, "1d"),  # years: the coarsest tier, re-enqueued there day after day
    ],
)
def test_choose_tier(remaining, tier):
    assert choose_tier(remaining) == tier


def test_every_tier_is_reachable_and_never_overshoots():
    for name, delay in TIMER_TIERS_MS.items():
        assert choose_tier(delay) == name
    # the chosen tier's delay never exceeds the remaining time (a timer is never held past due),
    # except that anything due sooner than the smallest tier goes to the smallest tier
    smallest = min(TIMER_TIERS_MS.values())
    for remaining in range(-5 * SECOND, 3 * DAY, 997 * SECOND + 13):
        delay = TIMER_TIERS_MS[choose_tier(remaining)]
        assert delay <= max(remaining, smallest)
        bigger = [d for d in TIMER_TIERS_MS.values() if delay < d <= remaining]
        assert not bigger, f"{remaining} ms: a coarser tier fits"
