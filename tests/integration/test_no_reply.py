"""``NoReplyError``: Kafka took the command and no engine answered, told apart from a broker that
did not take it (``BrokerUnavailableError``, its base class; tests/faults/test_wedged_producer.py).
Over HTTP: tests/integration/test_gateway.py (503 ``no_reply``)."""

import pytest

from kadence import BrokerUnavailableError, NoReplyError

from .workflows import ThreeSteps


async def test_a_command_no_processor_answers_raises_no_reply_error(client):
    # no history processor runs in this namespace: the broker acknowledges the start, nobody answers
    with pytest.raises(NoReplyError, match="Kafka has the command, the engine did not answer") as raised:
        await client.start_workflow(ThreeSteps, 1, id="nobody-home", task_queue="q", timeout=3)
    assert "is the history processor running?" in str(raised.value)
    assert isinstance(raised.value, BrokerUnavailableError)  # code that catches the base goes on working
    assert client.engine._delivered == set() and client.engine._pending == {}  # nothing kept
