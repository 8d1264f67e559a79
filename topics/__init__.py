"""Topics: the catalogue, Kafka client configuration, Avro serialization and partitioning.

Shared by every component (processors, sdk, gateway, connectors); imports only ``kadence.schemas``.
"""

from .catalogue import TIMER_TIERS_MS, ApplyReport, Catalogue, TopicSpec
from .config import KafkaConfig
from .engine_client import EngineClient
from .errors import *  # noqa: F403 - the error tree is part of this package's API
from .errors import __all__ as _errors_all
from .large_payloads import LargePayloadConfig, LargePayloads
from .partitioner import murmur2, partition_for
from .payload import JsonConverter, PayloadCodec, PayloadConverter, exception_from_failure, failure_from_exception
from .queue_limits import QueueLimit
from .serde import Codec, codec, decode, encode

__all__ = [
    "Catalogue",
    "TopicSpec",
    "ApplyReport",
    "TIMER_TIERS_MS",
    "KafkaConfig",
    "EngineClient",
    "murmur2",
    "partition_for",
    "JsonConverter",
    "PayloadCodec",
    "PayloadConverter",
    "failure_from_exception",
    "exception_from_failure",
    "Codec",
    "codec",
    "encode",
    "decode",
    "LargePayloads",
    "LargePayloadConfig",
    "QueueLimit",
    *_errors_all,
]
