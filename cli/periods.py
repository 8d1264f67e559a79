"""Periods as the CLI takes them: NUMBER+UNIT (``500ms``, ``1s``, ``5m``, ``1h``, ``1d``)."""

from __future__ import annotations

__all__ = ["period_ms"]

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def period_ms(text: str) -> int | None:
    """``text`` in milliseconds; None when it is not NUMBER+UNIT."""
    digits = text.rstrip("smhd")
    unit = text[len(digits) :]
    return int(digits) * _UNIT_MS[unit] if digits.isdigit() and unit in _UNIT_MS else None
