import pytest

from tests.integration.conftest import client, kafka_config, processors, pytest_runtest_makereport  # noqa: F401


@pytest.fixture
def own_broker(request):
    """A broker of the test's own, for tests that restart it (the session's broker stays up).
    A test marked ``broker_config({...})`` gets those server.properties entries on top."""
    from kadence.devstack import services as devstack  # the project's broker launcher

    marker = request.node.get_closest_marker("broker_config")
    broker = devstack.KafkaBroker(die_with_parent=True, config=marker.args[0] if marker else None)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
        broker.cleanup()
