"""Hello, mutual TLS (Temporal: ``hello_mtls``): Kadence talks to Kafka, so mutual TLS is Kafka's
own. The client presents a certificate signed by the cluster's CA; the brokers take its subject
(``User:CN=<name>``) as the principal that ACLs grant (``kadence acls``). The same settings come
from the environment for every ``kadence`` command: ``KADENCE_KAFKA_SECURITY_PROTOCOL=SSL``,
``KADENCE_KAFKA_SSL_CA``, ``KADENCE_KAFKA_SSL_CERT``, ``KADENCE_KAFKA_SSL_KEY`` (and
``KADENCE_KAFKA_SSL_KEY_PASSWORD`` for an encrypted key). A certificate the brokers refuse is a
``KafkaAuthenticationError`` saying so, not a broker that looks down.
Run on the secured three-broker cluster by tests/cluster/test_mutual_tls.py."""

from __future__ import annotations

from datetime import timedelta

from kadence import Client, KafkaConfig, Worker, activity, workflow

TASK_QUEUE = "hello-mtls"


def mtls_config(bootstrap: str, *, ca: str, cert: str, key: str, namespace: str = "kadence") -> KafkaConfig:
    """A ``KafkaConfig`` that authenticates with a client certificate (paths to PEM files)."""
    return KafkaConfig(
        bootstrap=bootstrap,
        namespace=namespace,
        security={
            "security.protocol": "SSL",
            "ssl.ca.location": ca,
            "ssl.certificate.location": cert,
            "ssl.key.location": key,
        },
    )


@activity.defn
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(greet, name, start_to_close_timeout=timedelta(seconds=10))


async def main(client: Client, workflow_id: str = "hello-mtls", task_queue: str = TASK_QUEUE) -> str:
    """``client``: connected with ``Client.connect(config=mtls_config(...))``."""
    async with Worker(client, task_queue=task_queue, workflows=[Greeting], activities=[greet]):
        return await client.execute_workflow(Greeting, "mTLS", id=workflow_id, task_queue=task_queue)
