"""``NoReplyError``: Kafka took the command and no engine answered, told apart from a broker that
did not take it (``BrokerUnavailableError``, its base class; tests/faults/test_wedged_producer.py)."""

import pytest

from kadence import BrokerUnavailableError, NoReplyError

from .workflows import ThreeSteps


async def test_a_command_no_processor_answers_raises_no_reply_error(client):
    # no history processor runs in this namespace: the broker acknowledges the start, nobody answers
    with pytest.raises(NoReplyError, match="Kafka has the command, the engine did not answer") as raised:
        await client.start_workflow(ThreeSteps, 1, id="nobody-home", task_queue="q", timeout=3)
    assert "is the history processor running?" in str(raised.value)
    assert isinstance(raised.value, BrokerUnavailableError)  # code that catches the base goes on working
    assert client._engine._delivered == set() and client._engine._pending == {}  # nothing kept


async def test_the_gateway_answers_no_reply_apart_from_a_dead_broker(kafka_config):
    """Over HTTP the same distinction: 503 ``no_reply`` (the command stands) rather than the
    ``unavailable`` of a broker that did not take it."""
    import httpx

    from kadence.gateway import GatewayConfig, create_app

    from .gateway_support import serve

    app = create_app(GatewayConfig(kafka=kafka_config, auth=False, reply_timeout=3.0))
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            answer = await http.post(
                "/v1/workflows/ThreeSteps/start", json={"workflow_id": "nobody-home-http", "task_queue": "q"}
            )
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    error = answer.json()["error"]
    assert error["code"] == "no_reply" and "the engine did not answer" in error["message"]
