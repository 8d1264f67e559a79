"""Consistency tokens: what a mutation's response hands back so that a later read can ask to see it.

A token names the namespace, the workflow, the run and the last history event seq of the run after
the command (the processor's ``Reply.history_seq``). It travels in the ``Kadence-Consistency-Token``
response header, not in the body, so that the retry of a request gets a byte-identical body even
though the run may have moved on. Clients treat it as opaque: urlsafe base64 of a JSON array.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

__all__ = ["TOKEN_HEADER", "ConsistencyToken"]

TOKEN_HEADER = "Kadence-Consistency-Token"
_VERSION = 1
_MAX_LEN = 2048


@dataclass(frozen=True)
class ConsistencyToken:
    namespace: str
    workflow_id: str
    run_id: str
    history_seq: int

    def encode(self) -> str:
        raw = json.dumps(
            [_VERSION, self.namespace, self.workflow_id, self.run_id, self.history_seq],
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> ConsistencyToken:
        """The token, or ValueError saying why it is not one."""
        if not text or len(text) > _MAX_LEN:
            raise ValueError("not a consistency token from this API")
        try:
            parts = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
            raise ValueError("not a consistency token from this API") from exc
        if (
            not isinstance(parts, list)
            or len(parts) != 5
            or parts[0] != _VERSION
            or not all(isinstance(p, str) and p for p in parts[1:4])
            or not isinstance(parts[4], int)
            or isinstance(parts[4], bool)
            or parts[4] < 0
        ):
            raise ValueError("not a consistency token from this API")
        return cls(parts[1], parts[2], parts[3], parts[4])
