"""A minimal HTTP/1.1 keep-alive client for the gateway scenario's closed loop.

The benchmark's client shares the 2 cores with the gateway it measures. httpx spends about 3 ms of
CPU per request on this machine (more than the gateway itself); this client writes the request
bytes and reads one response per connection at a time (no pipelining), well under a millisecond,
so the measurement is about the gateway, not the client. It knows just enough HTTP for a
server we control: Content-Length and chunked bodies, ``Connection: close``.
"""

from __future__ import annotations

import asyncio
import json

__all__ = ["Http1Pool", "Http1Response"]


class Http1Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status_code, self.headers, self.content = status, headers, body

    def json(self):
        return json.loads(self.content)


class Http1Pool:
    """Idle keep-alive connections to one host; a connection serves one request at a time."""

    def __init__(self, host: str, port: int, headers: dict[str, str] | None = None):
        self.host, self.port = host, port
        self._base = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"{host}:{port}", **(headers or {})}.items())
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post_json(self, path: str, body, headers: dict[str, str] | None = None) -> Http1Response:
        data = json.dumps(body, separators=(",", ":")).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST {path} HTTP/1.1\r\n{self._base}{extra}Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        return await self._exchange(head + data)

    async def get(self, path: str) -> Http1Response:
        return await self._exchange(f"GET {path} HTTP/1.1\r\n{self._base}\r\n".encode())

    async def _exchange(self, request: bytes) -> Http1Response:
        reader, writer = self._idle.pop() if self._idle else await asyncio.open_connection(self.host, self.port)
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            if headers.get("transfer-encoding", "").lower() == "chunked":
                parts = []
                while True:
                    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                    chunk = await reader.readexactly(size + 2)
                    if size == 0:
                        break
                    parts.append(chunk[:-2])
                body = b"".join(parts)
            else:
                body = await reader.readexactly(int(headers.get("content-length", "0")))
        except BaseException:
            writer.close()
            raise
        if headers.get("connection", "").lower() == "close":
            writer.close()
        else:
            self._idle.append((reader, writer))
        return Http1Response(status, headers, body)

    async def aclose(self) -> None:
        while self._idle:
            _reader, writer = self._idle.pop()
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
