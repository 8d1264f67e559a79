"""The history API's page cursor: opaque to clients, the last event seen and its run (the
history route and the console build and read it here)."""

from __future__ import annotations

import base64
import binascii
import json

from .errors import ApiError

__all__ = ["decode_cursor", "encode_cursor"]


def encode_cursor(seq: int, run_id: str) -> str:
    """Opaque to clients: the last event seen and its run."""
    return base64.urlsafe_b64encode(json.dumps([seq, run_id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        seq, run_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(seq, int) or not isinstance(run_id, str) or seq < 0:
            raise ValueError("bad cursor")
        return seq, run_id
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ApiError(400, "invalid_input", "cursor: not a cursor from this API", field="cursor") from exc
