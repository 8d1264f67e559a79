from tests.integration.conftest import client, kafka_config, processors, pytest_runtest_makereport  # noqa: F401
