"""Offset commits shared by the confluent-kafka connectors (archiver, bridges)."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaError, KafkaException

__all__ = ["commit_positions"]

log = logging.getLogger(__name__)


def commit_positions(consumer: Consumer) -> None:
    """Commit the consumed positions; a commit lost to a rebalance only means redelivery."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        err = exc.args[0]
        if err.fatal():
            raise
        if err.code() != KafkaError._NO_OFFSET:
            log.warning("offset commit failed (%s); the records will be delivered again", err.str())
