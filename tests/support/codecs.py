"""The process's codecs, made again: for tests that pin the schema write version
(``KADENCE_SCHEMA_WRITE_VERSION``) or swap the schema set. Codecs are cached per process
(``serde.codec``), and the write version is read once (``serde.write_version``)."""

from __future__ import annotations

from kadence.topics import serde

__all__ = ["pin_write_version", "remake_codecs"]


def remake_codecs() -> None:
    """Forget the cached write version and codecs: the next ``serde.codec`` is made anew."""
    serde.write_version.cache_clear()
    serde._CODECS.clear()


def pin_write_version(monkeypatch, version: int | str | None) -> None:
    """Make this process write ``version`` (None or "": the current one) from the next codec on."""
    if version is None or version == "":
        monkeypatch.delenv(serde.WRITE_VERSION_ENV, raising=False)
    else:
        monkeypatch.setenv(serde.WRITE_VERSION_ENV, str(version))
    remake_codecs()
