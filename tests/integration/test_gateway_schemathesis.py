"""Schemathesis against the running gateway (real broker, real engine, API key on): for each
operation of /openapi.json, a bounded number of generated requests (valid ones, then invalid ones);
every response must conform to the document (status code, content type, headers, body schema) and
none may be a 5xx. Deterministic (derandomized) and bounded: about 10-30 s on the dev stack."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from kadence.gateway import GatewayConfig, create_app

from .gateway_support import auth, make_key, redis_url, serve

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
#: examples per operation and mode: enough to reach every field and error path once, bounded for CPU
EXAMPLES = {schemathesis.GenerationMode.POSITIVE: 10, schemathesis.GenerationMode.NEGATIVE: 6}


@pytest.fixture(scope="module")
def fuzz_target(gw_config, engine):
    # reply_timeout well under the test's budget: a query to a run no worker serves must answer
    # and waits (start's wait_seconds, history's long-poll) cut short: generated values reach 60 s
    app = create_app(GatewayConfig(kafka=gw_config, redis_url=redis_url(), reply_timeout=5.0, max_wait_seconds=1.0))
    with serve(app) as url:
        yield url, make_key(gw_config.namespace)


@pytest.mark.parametrize("mode", list(EXAMPLES), ids=lambda m: m.value)
def test_every_operation_conforms_to_the_openapi_document(fuzz_target, mode):
    url, key = fuzz_target
    schema = schemathesis.openapi.from_dict(httpx.get(f"{url}/openapi.json", timeout=10).json())
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 10, "the document lost operations"
    checks = CHECKS + ([negative_data_rejection] if mode is schemathesis.GenerationMode.NEGATIVE else [ignored_auth])
    tried: dict[str, int] = {}
    for operation in operations:
        is_v1 = operation.path.startswith("/v1/")
        if mode is schemathesis.GenerationMode.NEGATIVE and not is_v1:
            continue  # health, readiness, metrics and the document take no input

        @settings(
            max_examples=EXAMPLES[mode],
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case):
            # called within this iteration (check() below): the loop's current operation
            tried[operation.label] = tried.get(operation.label, 0) + 1  # noqa: B023
            headers = auth(key) if is_v1 else None  # noqa: B023
            case.call_and_validate(base_url=url, headers=headers, checks=checks, timeout=30)

        check()
    assert all(tried.values()) and len(tried) >= (10 if mode is schemathesis.GenerationMode.POSITIVE else 7), tried
