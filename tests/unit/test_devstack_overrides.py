"""``KADENCE_KAFKA_SERVER_PROPS``: extra server.properties entries for the dev broker."""

from __future__ import annotations

import pytest

from kadence.testing import devstack


def test_overrides_are_read_as_key_value_pairs():
    env = {"KADENCE_KAFKA_SERVER_PROPS": "transaction.partition.verification.enable=false, num.io.threads=4"}
    assert devstack.server_overrides(env) == {
        "transaction.partition.verification.enable": "false",
        "num.io.threads": "4",
    }
    assert devstack.server_overrides({}) == {}


@pytest.mark.parametrize("raw", ["no-equals-sign", "=value"])
def test_a_malformed_override_stops_with_the_reason(raw):
    with pytest.raises(SystemExit, match="KADENCE_KAFKA_SERVER_PROPS"):
        devstack.server_overrides({"KADENCE_KAFKA_SERVER_PROPS": raw})


def test_overrides_win_over_the_defaults_in_server_properties(tmp_path):
    broker = devstack.KafkaBroker(config={"num.io.threads": 4})
    broker.port, broker.controller_port = 1, 2
    broker._write_config(tmp_path)
    lines = (tmp_path / "server.properties").read_text().splitlines()
    assert "num.io.threads=4" in lines and "num.io.threads=2" not in lines
