"""The dev cluster's first start survives a port that another process took between the moment the
port was chosen and the moment the node's JVM bound it (CI, session 63: a test's TLS server took a
secured node's controller port and the whole cluster fixture failed)."""

from __future__ import annotations

import socket

from kadence.devstack import cluster as devcluster
from kadence.devstack import services as devstack


def test_a_first_start_moves_to_fresh_ports_when_one_was_taken():
    cluster = devcluster.KafkaCluster(1, die_with_parent=True, heap_mb=256)
    node = cluster.nodes[0]
    taken = node.controller_port
    with socket.socket() as squatter:  # another process listening on the chosen port first
        squatter.bind((devstack.LOOPBACK, taken))
        squatter.listen()
        try:
            cluster.start(timeout=120.0)
            assert node.controller_port != taken
            assert devstack.kafka_ready(devstack.LOOPBACK, node.port)
            # the failed first attempt's storage was wiped, not reused with the old quorum
            assert f"@{devstack.LOOPBACK}:{taken}" not in (node.workdir / "server.properties").read_text()
        finally:
            cluster.cleanup()
