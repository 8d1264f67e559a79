"""A payload codec for the codec tests, importable by a `kadence --codec` subprocess
(``tests.integration.codec_support:Sealed``): zlib, then a byte mask, behind a marker. Not
encryption; it makes payloads unreadable without the codec, which is what the tests need."""

import zlib

MARK = b"sealed1:"


class Sealed:
    def encode(self, data: bytes) -> bytes:
        return MARK + bytes(b ^ 0x5A for b in zlib.compress(data))

    def decode(self, data: bytes) -> bytes:
        if not data.startswith(MARK):
            raise ValueError("not a sealed payload")
        return zlib.decompress(bytes(b ^ 0x5A for b in data[len(MARK) :]))


def broken():
    raise RuntimeError("no key configured")


# what `kadence worker --module tests.integration.codec_support` runs
from .workflows import Collector  # noqa: E402

WORKFLOWS = [Collector]
ACTIVITIES: list = []
