"""Inbound bridges, pure logic: configuration and the record -> command mapping."""

from __future__ import annotations

import json

import pytest

from kadence.connectors.bridges import BadRecord, Mapping, load_bridge_config, map_record
from kadence.topics import KafkaConfig, serde
from kadence.topics.errors import ConfigError
from kadence.topics.payload import JsonConverter
from kadence.topics.records import command

conv = JsonConverter()
START = Mapping(
    topic="orders.created",
    action="start",
    workflow_type="FulfilOrder",
    task_queue="orders",
    workflow_id_field="order.id",
    workflow_id_prefix="order-",
)


def test_start_takes_the_id_from_the_record_and_the_request_id_from_the_origin():
    value = json.dumps({"order": {"id": 42}, "total": 7}).encode()
    wf, body_type, body, rid = map_record(START, "orders.created", 3, 1200, value, conv)
    assert (wf, body_type, rid) == ("order-42", "StartWorkflow", "bridge:orders.created:3:1200")
    assert conv.from_bytes(body["input"]) == [{"order": {"id": 42}, "total": 7}]
    assert body["id_reuse_policy"] == "reject_duplicate"
    serde.encode("Command", command(wf, body_type, body, request_id=rid))  # a valid Command
    # the same record maps to the same command: a replay is answered by the engine's dedupe
    assert map_record(START, "orders.created", 3, 1200, value, conv) == (wf, body_type, body, rid)


def test_derived_id_signal_and_request_id_field():
    derived = Mapping(topic="pings", action="start", workflow_type="Ping", task_queue="q", input_field="n")
    wf, _, body, rid = map_record(derived, "pings", 0, 5, b'{"n": 1}', conv)
    assert wf == "pings-0-5" and rid == "bridge:pings:0:5" and conv.from_bytes(body["input"]) == [1]
    sig = Mapping(
        topic="orders.shipped",
        action="signal",
        signal="shipped",
        workflow_id_field="order_id",
        input_field="tracking",
        request_id_field="event_id",
    )
    wf, body_type, body, rid = map_record(
        sig, "orders.shipped", 1, 9, b'{"order_id": "A1", "tracking": "T9", "event_id": "ev-1"}', conv
    )
    assert (wf, body_type, rid, body["signal_name"]) == ("A1", "SignalWorkflow", "bridge:ev-1", "shipped")
    assert conv.from_bytes(body["input"]) == ["T9"]


@pytest.mark.parametrize(
    "value, reason",
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"x": 1}', "'order.id' is missing"),
        (b'{"order": {"id": null}}', "non-empty string or an integer"),
        (None, "no value"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_bad_records_say_why(value, reason):
    with pytest.raises(BadRecord, match=reason):
        map_record(START, "orders.created", 0, 0, value, conv)


def test_config_file(tmp_path):
    path = tmp_path / "bridges.toml"
    path.write_text("""
[bridge]
name = "orders"

[[mappings]]
topic = "orders.created"
action = "start"
workflow_type = "FulfilOrder"
task_queue = "orders"
workflow_id_field = "order_id"

[[mappings]]
topic = "orders.shipped"
action = "signal"
signal = "shipped"
workflow_id_field = "order_id"
""")
    cfg = load_bridge_config(path, KafkaConfig())
    assert cfg.name == "orders" and [m.action for m in cfg.mappings] == ["start", "signal"]
    assert cfg.mapping_for("orders.shipped").signal == "shipped"
    path.write_text('[[mappings]]\ntopic = "t"\naction = "start"\nworkflow_type = "W"\ntask_queue = "q"\ncolour = 1\n')
    with pytest.raises(ConfigError, match="unknown keys"):
        load_bridge_config(path, KafkaConfig())
    with pytest.raises(ConfigError, match="workflow_id_field"):
        Mapping(topic="t", action="signal", signal="s")
    with pytest.raises(ConfigError, match="start or signal"):
        Mapping(topic="t", action="stop")
    with pytest.raises(ConfigError, match="id_reuse_policy"):
        Mapping(topic="t", action="start", workflow_type="W", task_queue="q", id_reuse_policy="sometimes")


def test_the_documented_configurations_load():
    from pathlib import Path

    from kadence.connectors.archiver import retention_from_file

    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    cfg = load_bridge_config(examples / "orders-bridge.toml", KafkaConfig())
    assert [(m.topic, m.action) for m in cfg.mappings] == [("orders.created", "start"), ("orders.shipped", "signal")]
    wf, _, _, rid = map_record(
        cfg.mappings[1],
        "orders.shipped",
        0,
        7,
        b'{"order_id": "A-1001", "tracking": "trk-1", "shipment_id": "s-1"}',
        conv,
    )
    assert (wf, rid) == ("order-A-1001", "bridge:s-1")
    assert retention_from_file(str(examples / "archive.toml"), "orders") == 30 * 86400
    assert retention_from_file(str(examples / "archive.toml"), "kadence") == 7 * 86400


def test_a_record_whose_workflow_id_holds_a_control_character_is_a_bad_record():
    m = Mapping(topic="orders", action="start", workflow_type="Order", task_queue="q", workflow_id_field="id")
    with pytest.raises(BadRecord, match="U\\+000A"):
        map_record(m, "orders", 0, 1, json.dumps({"id": "a\nforged"}).encode(), JsonConverter())
    with pytest.raises(ConfigError, match="task_queue"):
        Mapping(topic="orders", action="start", workflow_type="Order", task_queue="bad/queue")


def test_a_bridge_encodes_its_inputs_with_the_applications_codec():
    from pathlib import Path

    from kadence.connectors.bridges import Bridge
    from tests.integration.codec_support import MARK, Sealed

    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    cfg = load_bridge_config(examples / "orders-bridge.toml", KafkaConfig(bootstrap="127.0.0.1:1"), codec=Sealed())
    bridge = Bridge(cfg)  # nothing connects until it runs
    try:
        _wf, _type, body, _rid = map_record(
            cfg.mappings[0], "orders.created", 0, 1, b'{"order_id": 7}', bridge.converter
        )
    finally:
        bridge.stop()
    assert body["input"].startswith(MARK)  # sealed, as the workers expect it
    assert JsonConverter(Sealed()).from_bytes(body["input"]) == [{"order_id": 7}]
