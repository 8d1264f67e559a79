"""The chaos suite's broker faults on a replicated cluster (issue 43), and the probes that time
how long each fault left a shard unserved.

``ClusterBrokers`` wraps a three-node ``devcluster.KafkaCluster`` (RF 3, min ISR 2) for
``tests/faults/chaos/cluster.Cluster``: ``restart()`` (the single-broker suite's
``restart_broker``: one node, gracefully) and the cluster's own faults, each returning what it
hit. The probes that time how long each partition went unserved are
``kadence.testing.PartitionProbes``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal

from confluent_kafka.admin import AdminClient

from kadence.topics import Catalogue, KafkaConfig

#: how long a killed node stays down before it is started again (seconds)
DOWN_S = (2.0, 6.0)
#: SIGSTOP of a node: past the cluster's broker session (4 s in the dev stack), so the
#: controller fences it and moves its leaderships, and back
BROKER_PAUSE_S = (5.0, 12.0)
#: the cluster's faults, each at least once a seed, with the engine's (``cluster.MINIMUM_FAULTS``)
CLUSTER_FAULTS = {"kill_leader": 2, "pause_broker": 1, "rolling_restart": 1, "lose_broker": 1, "kill_controller": 1}


class ClusterBrokers:
    def __init__(self, cluster, config: KafkaConfig, rng) -> None:
        self.cluster, self.config, self.rng = cluster, config, rng
        self.topics = Catalogue(config)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def log_path(self):  # the first node's, for the suite's post-mortem copy
        return self.cluster.nodes[0].log_path

    def _node(self, node_id: int):
        return self.cluster.nodes[node_id - 1]

    def leader_of(self, topic: str, partition: int) -> int:
        admin = AdminClient(self.config.base())
        md = admin.list_topics(topic, timeout=20).topics[topic]
        return md.partitions[partition].leader

    def controller(self) -> int:
        """The active controller: the leader in any live node's quorum state."""
        for node in self.cluster.nodes:
            state = node.workdir / "data" / "__cluster_metadata-0" / "quorum-state"
            if node.running and state.exists():
                leader = json.loads(state.read_text()).get("leaderId", -1)
                if leader > 0:
                    return leader
        return self.rng.choice(self.cluster.nodes).node_id

    async def _in_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def restart(self) -> None:
        self.rng.choice(self.cluster.nodes).restart(180)

    async def _kill_and_return(self, node) -> None:
        node.kill()
        await asyncio.sleep(self.rng.uniform(*DOWN_S))
        await self._in_thread(node.start, 180)

    async def kill_leader(self) -> str:
        """SIGKILL the leader of a commands or history partition; start it again a few seconds later."""
        topic = self.rng.choice([self.topics.commands, self.topics.history])
        partition = self.rng.randrange(self.config.partitions)
        leader = await self._in_thread(self.leader_of, topic, partition)
        if leader < 0:  # no leader right now (a fault before this one): any node
            leader = self.rng.choice(self.cluster.nodes).node_id
        await self._kill_and_return(self._node(leader))
        return f"node {leader} (leader of {topic}[{partition}])"

    async def pause_broker(self) -> str:
        node = self.rng.choice(self.cluster.nodes)
        seconds = self.rng.uniform(*BROKER_PAUSE_S)
        node.proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            node.proc.send_signal(signal.SIGCONT)
        return f"node {node.node_id} for {seconds:.1f} s"

    async def rolling_restart(self) -> str:
        """Every node in turn, gracefully, each back before the next goes (a weekly deploy)."""
        for node in self.cluster.nodes:
            await self._in_thread(node.restart, 180)
        return "all nodes"

    async def lose_broker(self) -> str:
        """A node lost for good: SIGKILLed, its data deleted, and a blank node with the same ID
        started in its place, which the others replicate everything back to."""
        node = self.rng.choice(self.cluster.nodes)
        node.kill()
        shutil.rmtree(node.workdir / "data", ignore_errors=True)
        await asyncio.sleep(self.rng.uniform(*DOWN_S))
        await self._in_thread(node.start, 180)
        return f"node {node.node_id}"

    async def kill_controller(self) -> str:
        leader = self.controller()
        await self._kill_and_return(self._node(leader))
        return f"node {leader}"
