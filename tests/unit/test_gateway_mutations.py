"""Every route the gateway serves is classified as a mutation or a read (issue 16): the guard
decides from the method and the raw path, so a route added later is a mutation until declared."""

import re

import pytest

from kadence.gateway import GatewayConfig, create_app
from kadence.gateway.middleware import is_mutation
from kadence.topics import KafkaConfig

#: (method, path template) -> does it change something
EXPECTED = {
    ("POST", "/v1/workflows/{workflow_type}/start"): True,
    ("POST", "/v1/activities/complete"): True,
    ("POST", "/v1/activities/fail"): True,
    ("POST", "/v1/activities/heartbeat"): True,
    ("POST", "/v1/activities/{activity_type}/start"): True,
    ("POST", "/v1/activities/{activity_id}/cancel"): True,
    ("POST", "/v1/activities/{activity_id}/terminate"): True,
    ("GET", "/v1/activities/{activity_id}/result"): False,
    ("GET", "/v1/activities/{activity_id}"): False,
    ("GET", "/v1/activities"): False,
    ("POST", "/v1/workflows/{workflow_id}/signals"): True,
    ("POST", "/v1/workflows/{workflow_id}/cancel"): True,
    ("POST", "/v1/workflows/{workflow_id}/terminate"): True,
    ("POST", "/v1/workflows/{workflow_id}/pause"): True,
    ("POST", "/v1/workflows/{workflow_id}/unpause"): True,
    ("POST", "/v1/workflows/{workflow_id}/reset"): True,
    ("POST", "/v1/batches"): True,
    ("GET", "/v1/batches/{batch_id}"): False,
    ("POST", "/v1/schedules/{schedule_id}"): True,
    ("PUT", "/v1/schedules/{schedule_id}"): True,
    ("DELETE", "/v1/schedules/{schedule_id}"): True,
    ("POST", "/v1/schedules/{schedule_id}/pause"): True,
    ("POST", "/v1/schedules/{schedule_id}/unpause"): True,
    ("POST", "/v1/schedules/{schedule_id}/trigger"): True,
    ("POST", "/v1/schedules/{schedule_id}/backfill"): True,
    ("GET", "/v1/schedules/{schedule_id}"): False,
    ("GET", "/v1/schedules"): False,
    ("GET", "/v1/workflows/{workflow_id}/streams/{stream}"): False,
    ("GET", "/v1/stuck"): False,
    ("GET", "/v1/dead-letters"): False,
    ("POST", "/v1/dead-letters/{ref}/redrive"): True,
    ("GET", "/v1/builds"): False,
    ("GET", "/v1/queues"): False,
    ("GET", "/v1/limits"): False,
    ("PUT", "/v1/limits/{key}"): True,
    ("DELETE", "/v1/limits/{key}"): True,
    ("PUT", "/v1/queues/{task_queue}/limits"): True,
    ("DELETE", "/v1/queues/{task_queue}/limits"): True,
    ("POST", "/v1/workflows/{workflow_id}/updates/{update_name}"): True,
    ("POST", "/v1/workflows/{workflow_id}/queries/{query_name}"): False,
    ("POST", "/v1/codec/decode"): False,
    ("GET", "/v1/workflows/{workflow_id}/history"): False,
    ("GET", "/v1/workflows/{workflow_id}"): False,
    ("GET", "/v1/workflows"): False,
}


def _served_routes() -> set[tuple[str, str]]:
    app = create_app(GatewayConfig(kafka=KafkaConfig(bootstrap="127.0.0.1:1", namespace="unit"), auth=False))
    out = set()
    for path, ops in app.openapi()["paths"].items():
        if path.startswith("/v1/"):
            out.update((method.upper(), path) for method in ops)
    return out


def test_every_served_v1_route_is_classified():
    served = _served_routes()
    assert served, "no /v1 route found in the served app"
    assert served == set(EXPECTED), f"classify these routes in EXPECTED: {sorted(served ^ set(EXPECTED))}"


@pytest.mark.parametrize(("method", "template"), sorted(EXPECTED))
def test_the_guard_classifies_each_route_as_expected(method, template):
    path = re.sub(r"\{[^}]+\}", "some-id", template)
    assert is_mutation(method, path) is EXPECTED[(method, template)]
    # an encoded slash in an ID does not turn a mutation into a read
    encoded = re.sub(r"\{[^}]+\}", "a%2Fqueries%2Fb", template)
    assert is_mutation(method, encoded) is EXPECTED[(method, template)]


def test_unknown_methods_and_paths_are_mutations():
    assert is_mutation("DELETE", "/v1/workflows/x")
    assert is_mutation("PUT", "/v1/workflows/x/queries/q")
    assert is_mutation("POST", "/v1/anything/new")
    assert not is_mutation("HEAD", "/v1/workflows/x")
