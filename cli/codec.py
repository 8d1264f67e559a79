"""The payload codec of a ``kadence`` command (``kadence --codec`` / ``KADENCE_CODEC``), made once
per invocation by the first command that encodes or shows payloads."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kadence.topics.payload import PayloadCodec

import click

__all__ = ["CODEC_KEY", "current_codec"]

CODEC_KEY = "kadence.codec"
CODEC_MADE_KEY = "kadence.codec.made"


def current_codec() -> PayloadCodec | None:
    """The payload codec given to ``kadence --codec`` (or KADENCE_CODEC), or None; made once, on
    first use, by the commands that encode or show payloads. A name that does not resolve, or a
    factory that fails, is a usage error (exit 2) before the command connects."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    made = ctx.meta.get(CODEC_MADE_KEY)
    if made is None:
        from kadence.topics import KadenceError
        from kadence.topics.payload import load_codec

        spec = ctx.meta.get(CODEC_KEY)
        try:
            made = ctx.meta[CODEC_MADE_KEY] = (load_codec(spec) if spec else None,)
        except KadenceError as exc:
            raise click.UsageError(str(exc)) from exc
    return made[0]
