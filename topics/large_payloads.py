"""Large payloads: stored once in object storage, referenced from the records.

A payload (after the codec, so an encrypted payload is stored encrypted) larger than
``threshold`` bytes (default 256 KiB) is written to a payload store (the archive store backends:
a local directory or S3) under its content hash, and the record carries a small reference instead::

    MARKER + sha256 hex + b" " + size in decimal

Reading a payload resolves the reference (``resolve``): the object is fetched, its hash checked,
and kept in a bounded cache, so a replay does not fetch it again. The converter does both
(``JsonConverter(large=...)``), so the client, the worker, replay, the CLI and the gateway see the
payload itself; the engine never reads payloads and carries the reference as it is.

A payload over ``limit`` (default 32 MiB) is refused with ``PayloadTooLargeError`` before anything
is written. Without a store, payloads stay inline (up to Kafka's message size, as before).
``kadence.storage.open_large_payloads(config)`` opens the store a ``LargePayloadConfig`` names.

The object key is ``payloads/{sha[:2]}/{sha}.bin``: a retry that writes the same bytes writes the
same object once. Objects no history refers to any more are removed by ``kadence payloads gc``
(``kadence.connectors.payload_gc``).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from . import settings
from .archive import ArchiveStore, ArchiveStoreConfig
from .errors import ArchiveError, ConfigError, PayloadTooLargeError, SchemaError
from .settings import setting

__all__ = [
    "MARKER",
    "PAYLOAD_PREFIX",
    "LargePayloadConfig",
    "LargePayloads",
    "is_reference",
    "payload_key",
    "references_in",
]

#: what a reference starts with; no JSON text starts with a NUL byte, nor do zlib, gzip or zstd
#: streams, and a random (encrypted) payload matches these 24 bytes with probability 2^-192
MARKER = b"\x00kadence-payload-ref/1\x00"
PAYLOAD_PREFIX = "payloads/"
_REF = re.compile(re.escape(MARKER) + rb"([0-9a-f]{64}) ([0-9]{1,12})")
KIB = 1024
MIB = 1024 * KIB


def payload_key(sha256_hex: str) -> str:
    """The store key of the object with this content hash."""
    return f"{PAYLOAD_PREFIX}{sha256_hex[:2]}/{sha256_hex}.bin"


def is_reference(data: bytes | None) -> bool:
    return data is not None and data[: len(MARKER)] == MARKER


def references_in(blob: bytes) -> Iterator[str]:
    """The content hashes of every reference inside ``blob`` (a whole Kafka record value, an
    archive file's event): for the garbage collector, which need not decode the record."""
    start = 0
    while True:
        i = blob.find(MARKER, start)
        if i < 0:
            return
        m = _REF.match(blob, i)
        if m is not None:
            yield m.group(1).decode()
        start = i + len(MARKER)


class LargePayloads:
    """Offload and resolve payloads. ``store`` None: payloads stay inline (and a reference read
    here is a ``SchemaError`` naming the setting)."""

    def __init__(
        self,
        store: ArchiveStore | None = None,
        *,
        threshold: int = 256 * KIB,
        limit: int = 32 * MIB,
        cache_bytes: int = 64 * MIB,
    ) -> None:
        if threshold < 1 or limit < 1:
            raise ConfigError(f"payload threshold and limit must be positive, got {threshold} and {limit}")
        self.store = store
        self.threshold = threshold
        self.limit = limit
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._cached = 0
        self._lock = threading.Lock()

    def offload(self, data: bytes) -> bytes:
        """``data`` itself, or a reference to it once it is stored; ``PayloadTooLargeError`` over
        the limit, before anything is written."""
        size = len(data)
        if size > self.limit:
            raise PayloadTooLargeError(
                f"a payload of {size} bytes is over the payload limit of {self.limit} bytes "
                f"(KADENCE_PAYLOAD_LIMIT); nothing was written",
                size=size,
                limit=self.limit,
            )
        if self.store is None or size <= self.threshold:
            return data
        digest = hashlib.sha256(data).hexdigest()
        key = payload_key(digest)
        try:
            self.store.put(key, data)
        except ArchiveError as exc:
            raise ArchiveError(
                f"a payload of {size} bytes could not be stored at {self.store.uri(key)}; nothing was written: {exc}"
            ) from exc
        self._remember(digest, data)
        return MARKER + digest.encode() + b" " + str(size).encode()

    def resolve(self, data: bytes) -> bytes:
        """The payload a reference stands for (``data`` unchanged when it is no reference)."""
        if not is_reference(data):
            return data
        m = _REF.fullmatch(data)
        if m is None:
            raise SchemaError("a payload reference is malformed (it should be the marker, a sha256 and a size)")
        digest, size = m.group(1).decode(), int(m.group(2))
        with self._lock:
            hit = self._cache.get(digest)
            if hit is not None:
                self._cache.move_to_end(digest)
                return hit
        if self.store is None:
            raise SchemaError(
                f"a payload of {size} bytes is kept in the payload store (sha256 {digest}), and no "
                f"payload store is configured here (KADENCE_PAYLOAD_DIR or KADENCE_PAYLOAD_S3_BUCKET)"
            )
        key = payload_key(digest)
        body = self.store.get(key)
        if body is None:
            raise SchemaError(
                f"the payload {self.store.uri(key)} is missing from the payload store "
                f"(collected, or another store configured here than where it was written)"
            )
        if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
            raise SchemaError(f"the payload {self.store.uri(key)} does not match its reference's hash or size")
        self._remember(digest, body)
        return body

    def _remember(self, digest: str, body: bytes) -> None:
        if len(body) > self._cache_bytes // 4:
            return
        with self._lock:
            if digest in self._cache:
                return
            self._cache[digest] = body
            self._cached += len(body)
            while self._cached > self._cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._cached -= len(old)


def _size(text: str) -> int:
    """Bytes from ``262144``, ``256KiB``, ``256k``, ``5MiB``, ``5m``."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([kmg]?)(i?b)?\s*", text.lower())
    if m is None:
        raise ConfigError("a size in bytes (e.g. 262144, 256KiB, 5MiB)")
    return int(m.group(1)) * {"": 1, "k": KIB, "m": MIB, "g": 1024 * MIB}[m.group(2)]


@dataclass(frozen=True, kw_only=True)
class LargePayloadConfig:
    """Where large payloads go. No store unless ``store`` is set (``KADENCE_PAYLOAD_DIR`` or
    ``KADENCE_PAYLOAD_S3_BUCKET``); then the same settings as the archive store, prefixed
    ``KADENCE_PAYLOAD_`` instead of ``KADENCE_ARCHIVE_``."""

    store: ArchiveStoreConfig | None = None
    threshold: int = setting(
        256 * KIB, env="KADENCE_PAYLOAD_THRESHOLD", help="payloads larger than this go to the store", parse=_size
    )
    limit: int = setting(
        32 * MIB, env="KADENCE_PAYLOAD_LIMIT", help="payloads larger than this are refused", parse=_size
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LargePayloadConfig:
        """The settings from the environment; a store when ``KADENCE_PAYLOAD_DIR`` or
        ``KADENCE_PAYLOAD_S3_BUCKET`` is set (the archive store's settings, ``KADENCE_PAYLOAD_``)."""
        env = os.environ if env is None else env
        store = None
        if env.get("KADENCE_PAYLOAD_DIR") or env.get("KADENCE_PAYLOAD_S3_BUCKET"):
            store = ArchiveStoreConfig.from_env(env, variables="KADENCE_PAYLOAD_")
        return settings.from_env(cls, env, store=store)
