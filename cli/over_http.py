"""The client commands over the HTTP gateway (issue 48 item 4): with ``KADENCE_GATEWAY_URL`` (and
``KADENCE_API_KEY``) set, ``start``, ``signal``, ``query``, ``describe``, ``history``, ``list``,
``cancel``, ``terminate``, ``pause``, ``unpause`` and ``reset`` send one HTTP request instead of opening Kafka
connections (a producer, a reply consumer, metadata): a call costs the interpreter's start and one
round trip.

Written on the standard library's ``http.client`` rather than httpx (which the gateway and the
console use): importing httpx alone took 61 ms of a 200 ms budget for the whole command on this
machine (``python -X importtime``), ``http.client`` about 5 ms. Imports nothing of Kadence's
kernel for the same reason (``import kadence.topics`` takes about 200 ms).
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Any

__all__ = ["Gateway", "GatewayError"]


class GatewayError(Exception):
    """The gateway refused a request (its ``error`` body), or could not be reached."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Gateway:
    """Where the commands go: the gateway's base URL, the API key, and the namespace to ask for
    (None: the key's own)."""

    url: str
    api_key: str | None = None
    namespace: str | None = None
    timeout: float = 90.0

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | list[tuple[str, Any]] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """The JSON answer to ``method path``; ``GatewayError`` for an error answer."""
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GatewayError(0, "invalid_url", f"KADENCE_GATEWAY_URL must be http(s)://host[:port], not {self.url!r}")
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
        target = parts.path.rstrip("/") + path
        if params:
            pairs = params.items() if isinstance(params, dict) else params
            target += "?" + urllib.parse.urlencode([(k, v) for k, v in pairs if v is not None])
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if self.namespace:
            headers["Kadence-Namespace"] = self.namespace
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, target, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise GatewayError(0, "unavailable", f"the gateway at {self.url} did not answer: {exc}") from exc
        finally:
            conn.close()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        if resp.status >= 400:
            error = doc.get("error") if isinstance(doc, dict) else None
            if isinstance(error, dict):
                raise GatewayError(resp.status, str(error.get("code")), str(error.get("message")))
            raise GatewayError(resp.status, "http_error", f"HTTP {resp.status}: {raw[:300]!r}")
        return doc


def quote(value: str) -> str:
    """A path segment (a workflow ID may hold a slash: it is sent encoded)."""
    return urllib.parse.quote(value, safe="")
