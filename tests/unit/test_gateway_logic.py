"""Pure parts of the gateway: consistency tokens, request fingerprints, key format, settings."""

import base64
import json

import pytest

from kadence.gateway import ConsistencyToken, GatewayConfig, RateLimit
from kadence.gateway.idempotency import fingerprint
from kadence.gateway.keys import parse_key
from kadence.topics import ConfigError, KafkaConfig


def test_a_consistency_token_round_trips_and_is_url_safe():
    token = ConsistencyToken("orders", "заказ/1 ?&", "run-1", 17)
    text = token.encode()
    assert ConsistencyToken.decode(text) == token
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "!!!",
        "x" * 5000,
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(json.dumps([1, "ns", "wf", "run", -1]).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps([1, "ns", "wf", "run", True]).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps([2, "ns", "wf", "run", 3]).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps([1, "", "wf", "run", 3]).encode()).decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_anything_else_is_not_a_token(text):
    with pytest.raises(ValueError):
        ConsistencyToken.decode(text)


def test_fingerprints_ignore_json_formatting_but_not_content():
    a = fingerprint("POST", "/v1/workflows/T/start", b'{"a": 1, "b": [1, 2]}')
    assert a == fingerprint("post", "/v1/workflows/T/start", b'{"b":[1,2],"a":1}')
    assert a != fingerprint("POST", "/v1/workflows/T/start", b'{"a": 2, "b": [1, 2]}')
    assert a != fingerprint("POST", "/v1/workflows/U/start", b'{"a": 1, "b": [1, 2]}')
    assert fingerprint("POST", "/p", b"not json") != fingerprint("POST", "/p", b"not json ")
    # the parts are length-prefixed: moving bytes between path and body changes the hash
    assert fingerprint("POST", "/p1", b"") != fingerprint("POST", "/p", b"1")


def test_key_format():
    good = "kdn_0123456789ab_" + "A" * 43
    assert parse_key(good) == ("0123456789ab", good)
    for bad in ("", "kdn_0123456789ab_short", "xyz_0123456789ab_" + "A" * 43, good + "x", "Bearer " + good):
        assert parse_key(bad) is None
    # a secret is token_urlsafe: "_" and "-" belong to it (about half of all keys hold a "_")
    underscored = "kdn_0123456789ab_" + "a_b-" * 10 + "c_d"
    assert parse_key(underscored) == ("0123456789ab", underscored)


def test_settings():
    assert RateLimit.parse("100:200") == RateLimit(100, 200)
    assert not RateLimit.parse("0").enabled
    for bad in ("x", "10:y", "-1:5"):
        with pytest.raises(ConfigError):
            RateLimit.parse(bad)
    with pytest.raises(ConfigError, match="KADENCE_REDIS_URL"):
        GatewayConfig(kafka=KafkaConfig())
    env = {"KADENCE_GATEWAY_AUTH": "0", "KADENCE_GATEWAY_NAMESPACES": "a, b", "KADENCE_GATEWAY_NS_LIMIT": "5:10"}
    config = GatewayConfig.from_env(KafkaConfig(), env)
    assert (config.auth, config.namespaces, config.namespace_limit) == (False, ("a", "b"), RateLimit(5, 10))
    with pytest.raises(ConfigError):
        GatewayConfig(kafka=KafkaConfig(), auth=False, namespaces=("Bad NS",))


def test_an_unexpected_error_is_a_500_in_the_error_shape_without_its_trace():
    from fastapi.testclient import TestClient

    from kadence.gateway import create_app

    class Broken:  # stands in for the engine client: fails in a way nobody planned for
        async def request(self, *a, **kw):
            raise RuntimeError("boom: internal detail")

    app = create_app(GatewayConfig(kafka=KafkaConfig(), auth=False), engine=Broken())
    with TestClient(app, raise_server_exceptions=False) as http:
        resp = http.get("/v1/workflows/x")
    assert resp.status_code == 500
    assert resp.json() == {"error": {"code": "internal_error", "message": "unexpected error (logged by the gateway)"}}
    assert "boom" not in resp.text and "Traceback" not in resp.text


def test_the_body_limit_filter_counts_chunked_bodies_and_replays_them_whole_to_the_route():
    import json

    from fastapi.testclient import TestClient

    from kadence.gateway import create_app

    class Recorder:  # stands in for the engine client: records the commands, answers ok
        def __init__(self):
            self.commands = []

        async def request(self, workflow_id, body_type, payload, **_kw):
            self.commands.append((workflow_id, body_type, payload))
            return {"status": "ok", "run_id": "r1", "history_seq": 1}

    engine = Recorder()
    app = create_app(GatewayConfig(kafka=KafkaConfig(), auth=False, max_body_bytes=1000), engine=engine)
    body = json.dumps({"workflow_id": "w1", "task_queue": "q", "input": ["x" * 300]}).encode()
    chunks = [body[i : i + 100] for i in range(0, len(body), 100)]  # several http.request messages
    with TestClient(app) as http:
        resp = http.post("/v1/workflows/Flow/start", content=iter(chunks), headers={"Content-Type": "application/json"})
        assert resp.status_code == 201, resp.text
        assert [(w, t) for w, t, _ in engine.commands] == [("w1", "StartWorkflow")]
        # over the limit without a Content-Length: 413, and nothing reaches the engine
        resp = http.post(
            "/v1/workflows/Flow/start", content=iter([body] * 4), headers={"Content-Type": "application/json"}
        )
        assert resp.status_code == 413 and resp.json()["error"]["code"] == "payload_too_large"
        assert len(engine.commands) == 1
        metrics = http.get("/metrics").text
    assert (
        'kadence_gateway_requests_total{method="POST",route="/v1/workflows/{workflow_type}/start",status="201"} 1.0'
        in metrics
    )
    assert 'kadence_gateway_requests_total{method="POST",route="unmatched",status="413"} 1.0' in metrics
