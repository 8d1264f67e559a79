"""The client commands over the HTTP gateway (issue 48 item 4): with ``KADENCE_GATEWAY_URL`` (and
``KADENCE_API_KEY``) set, ``start``, ``signal``, ``query``, ``describe``, ``history``, ``stream``, ``list``,
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
from collections.abc import Iterator
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
        conn, target = self._connect(path, params)
        headers = self._headers("application/json")
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
        if resp.status >= 400:
            raise _refusal(resp.status, raw)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def events(self, path: str, *, params: dict[str, Any] | None = None) -> Iterator[tuple[str | None, str, str]]:
        """The Server-Sent Events of ``GET path`` as (id, event, data), until the server ends the
        response; ``GatewayError`` for an error answer. Waits for events without a timeout."""
        conn, target = self._connect(path, params, timeout=None)
        try:
            try:
                conn.request("GET", target, headers=self._headers("text/event-stream"))
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise GatewayError(0, "unavailable", f"the gateway at {self.url} did not answer: {exc}") from exc
            if resp.status >= 400:
                raise _refusal(resp.status, resp.read())
            fields: dict[str, str] = {}
            for raw_line in resp:
                line = raw_line.decode().rstrip("\r\n")
                if line.startswith(":"):
                    continue
                if line:
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value
                elif fields:
                    yield fields.get("id"), fields.get("event", "message"), fields.get("data", "")
                    fields = {}
        finally:
            conn.close()

    def _connect(
        self, path: str, params: dict[str, Any] | list[tuple[str, Any]] | None, timeout: float | None = -1.0
    ) -> tuple[http.client.HTTPConnection, str]:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GatewayError(0, "invalid_url", f"KADENCE_GATEWAY_URL must be http(s)://host[:port], not {self.url!r}")
        wait = self.timeout if timeout == -1.0 else timeout
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=wait, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=wait)
        target = parts.path.rstrip("/") + path
        if params:
            pairs = params.items() if isinstance(params, dict) else params
            target += "?" + urllib.parse.urlencode([(k, v) for k, v in pairs if v is not None])
        return conn, target

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if self.namespace:
            headers["Kadence-Namespace"] = self.namespace
        return headers


def _refusal(status: int, raw: bytes) -> GatewayError:
    """The error of an error answer: its ``{"error": {"code", "message"}}``, else its start."""
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        return GatewayError(status, str(error.get("code")), str(error.get("message")))
    return GatewayError(status, "http_error", f"HTTP {status}: {raw[:300]!r}")


def quote(value: str) -> str:
    """A path segment (a workflow ID may hold a slash: it is sent encoded)."""
    return urllib.parse.quote(value, safe="")
