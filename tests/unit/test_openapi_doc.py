"""The OpenAPI document kept in the repo (docs/openapi.json) is the one the gateway serves (the same
with and without --no-auth: the API key stays documented)."""

import json
from pathlib import Path

from kadence.gateway import GatewayConfig, create_app
from kadence.topics import KafkaConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_committed_openapi_document_matches_the_gateway():
    served = create_app(GatewayConfig(kafka=KafkaConfig(), auth=False)).openapi()
    kept = json.loads(DOC.read_text())
    assert kept == json.loads(json.dumps(served)), (
        "docs/openapi.json is stale: regenerate it with\n"
        "  .venv/bin/python -c 'import json; from kadence.gateway import create_app, GatewayConfig; "
        "from kadence.topics import KafkaConfig; print(json.dumps(create_app(GatewayConfig(kafka=KafkaConfig(), auth=False))"
        ".openapi(), indent=1, sort_keys=True))' > docs/openapi.json"
    )


def test_the_document_is_the_same_with_auth_on():
    on = create_app(GatewayConfig(kafka=KafkaConfig(), redis_url="redis://127.0.0.1:1/0")).openapi()
    off = create_app(GatewayConfig(kafka=KafkaConfig(), auth=False)).openapi()
    assert on == off
