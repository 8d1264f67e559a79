"""The processor's transaction watchdog (librdkafka can block in a transaction call for ever)."""

import threading

import pytest

from kadence.processors.processor_config import ProcessorConfig
from kadence.topics import ConfigError, KafkaConfig
from kadence.topics.transactions import TxnWatchdog


def test_stalled_for_counts_only_while_a_transaction_is_open():
    w = TxnWatchdog(10, lambda s: None)
    assert w.stalled_for() == 0.0
    w.begin()
    since = w._since
    assert w.stalled_for(now=since + 4) == pytest.approx(4)
    w.end()
    assert w.stalled_for(now=since + 400) == 0.0


def test_a_blocked_transaction_calls_on_stall_once():
    fired = []
    done = threading.Event()
    w = TxnWatchdog(0.5, lambda s: (fired.append(s), done.set()))
    w.start()
    w.begin()  # and never end: the call hangs
    assert done.wait(10)
    assert len(fired) == 1 and fired[0] > 0.5
    w.stop()


def test_the_limit_comes_from_the_environment():
    kafka = KafkaConfig()
    assert ProcessorConfig.from_env(kafka, env={}).txn_stall_exit_s == 180.0
    assert ProcessorConfig.from_env(kafka, env={"KADENCE_TXN_STALL_EXIT_S": "45"}).txn_stall_exit_s == 45.0
    with pytest.raises(ConfigError):
        ProcessorConfig(kafka=kafka, txn_stall_exit_s=0)


def test_the_hang_allowance_is_read_and_checked():
    kafka = KafkaConfig()
    assert ProcessorConfig.from_env(kafka, env={}).txn_hang_s == 4.0
    assert ProcessorConfig.from_env(kafka, env={"KADENCE_TXN_HANG_S": "2.5"}).txn_hang_s == 2.5
    for bad in ("0", "61", "soon"):
        with pytest.raises(ConfigError, match="KADENCE_TXN_HANG_S|txn_hang_s"):
            ProcessorConfig.from_env(kafka, env={"KADENCE_TXN_HANG_S": bad})
