"""The start and signal bodies come from one place (``kadence.topics.protocol``) for the SDK
client, the gateway and the bridges: every sender fills every field the same way, and bad input
is refused before anything is sent (issue 20 item 2)."""

from __future__ import annotations

import json

import pytest

from kadence import Client, InvalidIdentifierError, KadenceError, workflow
from kadence.connectors.bridges import Mapping, map_record
from kadence.topics import serde
from kadence.topics.payload import JsonConverter
from kadence.topics.protocol import ID_REUSE_POLICIES, signal_body, start_body


@workflow.defn
class Order:
    @workflow.run
    async def run(self, order: dict) -> str:
        return order["id"]


def _schema_fields(record: str) -> set[str]:
    from kadence.schemas import load_schema_set

    return {f["name"] for f in next(s for s in load_schema_set() if s["name"] == record)["fields"]}


def test_a_start_body_names_every_field_a_client_may_set_and_encodes():
    body = start_body("Order", "orders", b"[]")
    # the parent, close policy and build fields are the engine's own, for child workflows; the
    # eager first task is added by a client whose worker ran it (sdk._eager_start), the result
    # request by execute_workflow; a standalone activity's options by topics.standalone
    internal = {
        "activity",
        "parent_workflow_id",
        "parent_run_id",
        "parent_initiated_seq",
        "parent_close_policy",
        "build_id",
        "eager_workflow_task",
        "result_request_id",
    }
    assert set(body) == _schema_fields("StartWorkflow") - internal
    assert body["id_reuse_policy"] == "allow_duplicate" and body["memo"] == {} and body["run_timeout_ms"] is None
    assert serde.decode("StartWorkflow", serde.encode("StartWorkflow", body))["workflow_type"] == "Order"


def test_bad_input_is_refused_with_a_typed_error():
    with pytest.raises(KadenceError, match="id_reuse_policy must be one of"):
        start_body("Order", "orders", b"[]", id_reuse_policy="sometimes")
    with pytest.raises(InvalidIdentifierError):
        start_body("Order", "orders with spaces/and a slash", b"[]")
    with pytest.raises(InvalidIdentifierError):
        start_body("", "orders", b"[]")
    with pytest.raises(InvalidIdentifierError):
        signal_body("", b"[]", identity="t")
    assert set(ID_REUSE_POLICIES) == {
        "allow_duplicate",
        "allow_duplicate_failed_only",
        "reject_duplicate",
        "terminate_if_running",
    }


def test_the_sdk_and_a_bridge_send_the_same_start_body():
    conv = JsonConverter()
    client = Client.__new__(Client)
    client.converter = conv
    from_sdk = client._start_body(Order, ({"id": "o-1"},), "orders", "reject_duplicate", None, None)
    mapping = Mapping(
        topic="orders.created",
        action="start",
        workflow_type="Order",
        task_queue="orders",
        workflow_id_field="id",
        id_reuse_policy="reject_duplicate",
    )
    _wf, body_type, from_bridge, _rid = map_record(
        mapping, "orders.created", 0, 7, json.dumps({"id": "o-1"}).encode(), conv
    )
    assert body_type == "StartWorkflow" and from_bridge == from_sdk
    signal = signal_body("approve", conv.to_bytes(["yes"]), identity="bridge")
    assert set(signal) == _schema_fields("SignalWorkflow")
