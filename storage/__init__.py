"""Storage adapters: the archive stores (a local directory, an S3-compatible bucket) behind
``kadence.topics.archive.ArchiveStore``, and the opening of the large-payload store a
``LargePayloadConfig`` names. Imports only ``kadence.topics`` and ``kadence.schemas``; the SDK,
the gateway, the connectors and the CLI open their stores through it."""

from __future__ import annotations

from kadence.topics.large_payloads import LargePayloadConfig, LargePayloads

from .blob_stores import LocalArchiveStore, S3ArchiveStore, open_store

__all__ = ["LocalArchiveStore", "S3ArchiveStore", "open_large_payloads", "open_store"]


def open_large_payloads(config: LargePayloadConfig) -> LargePayloads:
    """The large-payload store ``config`` names (none: payloads stay inline), with its threshold
    and limit, for ``JsonConverter(large=...)`` and ``Client.connect(large_payloads=...)``."""
    store = open_store(config.store) if config.store is not None else None
    return LargePayloads(store, threshold=config.threshold, limit=config.limit)
