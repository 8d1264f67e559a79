#!/usr/bin/env python3
"""Kadence development stack: a replicated, secured Kafka cluster on loopback, as Kafka teams run
in production (issue 43); the single broker and Redis are ``kadence.devstack.services``.

Standard library only, like devstack: ``scripts/devstack.py run`` loads it from its file when
``KADENCE_KAFKA_BROKERS`` or ``KADENCE_KAFKA_SECURITY`` asks for a cluster (docs/dev-stack.md,
"A replicated, secured cluster").

    from kadence.devstack.cluster import KafkaCluster
    with KafkaCluster(3, secure=True, users={"app": "secret"}) as cluster:
        cluster.grant_namespace("app", "orders")
        env = cluster.client_env("app")     # KADENCE_KAFKA_* for a process connecting as app
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path

if __package__:  # kadence.devstack.cluster
    from . import services as _stack
else:  # loaded from its file by devstack (scripts/devstack.py), which registered itself first
    _stack = sys.modules["kadence_devstack"]

JVM_OPTS = _stack.JVM_OPTS
LOOPBACK = _stack.LOOPBACK
KafkaBroker = _stack.KafkaBroker
StackError = _stack.StackError
ensure_tools = _stack.ensure_tools
java_binary = _stack.java_binary
kafka_ready = _stack.kafka_ready
log = _stack.log
resolve_jars = _stack.resolve_jars
_wait_until = _stack._wait_until

__all__ = ["KafkaCluster", "TlsMaterial", "cluster_wanted", "start_for_run"]


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise StackError(f"openssl {args[0]} failed: {result.stderr.strip()[-400:]}")


class TlsMaterial:
    """A throw-away certificate authority and PEM files made with ``openssl``: one certificate
    for every broker (``CN=kadence-broker``, valid for 127.0.0.1 and localhost) and client
    certificates on request, all signed by the CA; ``other_ca`` is a second CA that signed none
    of them (a client trusting it must refuse the brokers)."""

    BROKER_CN = "kadence-broker"

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.ca_cert = self.dir / "ca.crt"
        self.broker_pem = self.dir / "broker.pem"  # the broker's key, then its certificate
        self.other_ca = self.dir / "other-ca.crt"

    def make(self, days: int = 7) -> TlsMaterial:
        if self.broker_pem.exists():
            return self
        ensure_tools(["openssl"])
        self.dir.mkdir(parents=True, exist_ok=True)
        for name in ("ca", "other-ca"):
            _openssl(
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", str(days), "-subj", f"/CN=Kadence dev {name}",
                "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=self.dir,
            )  # fmt: skip
        key, cert = self.issue(self.BROKER_CN, days=days, san="IP:127.0.0.1,DNS:localhost")
        self.broker_pem.write_text(Path(key).read_text() + Path(cert).read_text())
        return self

    def issue(self, cn: str, days: int = 7, san: str | None = None) -> tuple[Path, Path]:
        """A key and a certificate for ``cn`` signed by the CA: (key path, certificate path)."""
        key, csr, cert = (self.dir / f"{cn}.{ext}" for ext in ("key", "csr", "crt"))
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={cn}",
            "-keyout",
            key.name,
            "-out",
            csr.name,
            cwd=self.dir,
        )
        ext = self.dir / f"{cn}.ext"
        ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
        _openssl(
            "x509", "-req", "-in", csr.name, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", str(days),
            "-extfile", ext.name, "-out", cert.name, cwd=self.dir,
        )  # fmt: skip
        return key, cert


class KafkaCluster:
    """``nodes`` KRaft nodes on loopback, each a broker and a voter of one controller quorum
    (combined mode, a quorum of ``nodes``), replicated as production clusters are: replication
    factor 3 and min ISR 2 for the internal topics (capped at ``nodes``).

    ``secure=True``: clients connect over SASL_SSL with SCRAM-SHA-512 users, brokers talk to each
    other over the same listener as the super user ``admin``, the controller listener takes
    brokers by their TLS certificate (mutual TLS), and the StandardAuthorizer refuses what no ACL
    allows. The users in ``users`` (name -> password) are created when the storage is formatted.

    Each node is a ``KafkaBroker`` (``nodes[i]``) that can be stopped, killed and restarted alone."""

    def __init__(
        self,
        nodes: int = 3,
        *,
        secure: bool = False,
        mtls: bool = False,
        users: Mapping[str, str] | None = None,
        version: str | None = None,
        workdir: str | Path | None = None,
        die_with_parent: bool = False,
        config: Mapping[str, object] | None = None,
        heap_mb: int = 512,
    ) -> None:
        if nodes < 1:
            raise StackError("a cluster needs at least one node")
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="kadence-kafka-cluster-"))
        self._own_dir = workdir is None
        self.secure = secure
        #: also an SSL listener that requires a client certificate (``mtls_bootstrap``): the
        #: principal is the certificate's subject, ``User:CN=<name>``
        self.mtls = bool(mtls and secure)
        self.admin_password = base64.urlsafe_b64encode(os.urandom(12)).decode()
        self.users = {"admin": self.admin_password, **(users or {})}
        self.tls = TlsMaterial(self.workdir / "tls") if secure else None
        self.cluster_id = "-"
        while self.cluster_id.startswith("-"):
            self.cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        self.jvm_opts = [f"-Xms{min(256, heap_mb)}m", f"-Xmx{heap_mb}m", *JVM_OPTS[2:]]
        self.nodes = [
            KafkaBroker(version, self.workdir / f"node{i}", die_with_parent, config, node_id=i, cluster=self)
            for i in range(1, nodes + 1)
        ]
        self._assign_ports()

    @property
    def _tls(self) -> TlsMaterial:
        """The TLS material of a secured cluster."""
        if self.tls is None:
            raise StackError("the cluster is not secured: it has no TLS material")
        return self.tls

    def _assign_ports(self) -> None:
        per_node = 3 if self.mtls else 2
        ports = _stack.free_ports(per_node * len(self.nodes))
        for i, node in enumerate(self.nodes):
            node.port, node.controller_port, *mtls = ports[per_node * i : per_node * (i + 1)]
            node.mtls_port = mtls[0] if mtls else None

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def mtls_bootstrap(self) -> str:
        """The mutual-TLS listeners (``mtls=True``)."""
        return ",".join(f"{LOOPBACK}:{node.mtls_port}" for node in self.nodes)

    def mtls_env(self, cert: Path | str, key: Path | str) -> dict[str, str]:
        """The ``KADENCE_KAFKA_*`` variables of a client that authenticates with a certificate."""
        return {
            "KADENCE_KAFKA_BOOTSTRAP": self.mtls_bootstrap,
            "KADENCE_REPLICATION": str(self.replication),
            "KADENCE_KAFKA_SECURITY_PROTOCOL": "SSL",
            "KADENCE_KAFKA_SSL_CA": str(self._tls.ca_cert),
            "KADENCE_KAFKA_SSL_CERT": str(cert),
            "KADENCE_KAFKA_SSL_KEY": str(key),
        }

    @property
    def replication(self) -> int:
        return min(3, len(self.nodes))

    @property
    def min_insync(self) -> int:
        return min(2, len(self.nodes))

    def node_properties(self, node: KafkaBroker) -> dict[str, object]:
        """The server.properties entries of ``node`` that differ from a single node's."""
        rf, isr = self.replication, self.min_insync
        props: dict[str, object] = {
            "node.id": node.node_id,
            "controller.quorum.voters": ",".join(f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in self.nodes),
            "default.replication.factor": rf,
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": isr,
        }
        if not self.secure:
            return props
        jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required"
        listeners = f"SASL_SSL://{LOOPBACK}:{node.port},CONTROLLER://{LOOPBACK}:{node.controller_port}"
        advertised = f"SASL_SSL://{LOOPBACK}:{node.port}"
        protocols = "CONTROLLER:SSL,SASL_SSL:SASL_SSL"
        extra: dict[str, object] = {}
        if self.mtls:
            listeners += f",MTLS://{LOOPBACK}:{node.mtls_port}"
            advertised += f",MTLS://{LOOPBACK}:{node.mtls_port}"
            protocols += ",MTLS:SSL"
            extra["listener.name.mtls.ssl.client.auth"] = "required"
        return {
            **props,
            **extra,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "inter.broker.listener.name": "SASL_SSL",
            "listener.security.protocol.map": protocols,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                f'{jaas} username="admin" password="{self.admin_password}";'
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self._tls.broker_pem,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self._tls.ca_cert,
            "listener.name.controller.ssl.client.auth": "required",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:admin;User:CN={TlsMaterial.BROKER_CN}",
        }

    def format_args(self) -> list[str]:
        """StorageTool arguments that create the SCRAM users in the cluster's first metadata."""
        if not self.secure:
            return []
        out: list[str] = []
        for name, password in self.users.items():
            out += ["--add-scram", f"SCRAM-SHA-512=[name={name},password={password}]"]
        return out

    def client_env(self, user: str = "admin") -> dict[str, str]:
        """The ``KADENCE_KAFKA_*`` variables a Kadence process needs to connect as ``user``."""
        env = {"KADENCE_KAFKA_BOOTSTRAP": self.bootstrap, "KADENCE_REPLICATION": str(self.replication)}
        if self.secure:
            env.update(
                KADENCE_KAFKA_SECURITY_PROTOCOL="SASL_SSL",
                KADENCE_KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
                KADENCE_KAFKA_SASL_USERNAME=user,
                KADENCE_KAFKA_SASL_PASSWORD=self.users[user],
                KADENCE_KAFKA_SSL_CA=str(self._tls.ca_cert),
            )
        return env

    def java_client_properties(self, user: str = "admin") -> Path:
        """A properties file for Kafka's own command-line tools, connecting as ``user``."""
        path = self.workdir / f"client-{user}.properties"
        lines: dict[str, object] = {}
        if self.secure:
            lines = {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{self.users[user]}";',
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": self._tls.ca_cert,
            }
        path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        return path

    def grant_namespace(self, user: str, namespace: str, timeout: float = 120.0) -> None:
        """The ACLs a Kadence namespace needs for ``user`` (docs/deploy.md): every operation on the
        topics, consumer groups and transactional IDs under the prefix ``{namespace}.``, and
        IdempotentWrite on the cluster. Run with Kafka's own AclCommand, as the super user."""
        if not self.secure:
            return
        lib, java = resolve_jars(self.nodes[0].version), java_binary()
        base = [java, "-Xmx256m", "-cp", f"{lib}/*", "org.apache.kafka.tools.AclCommand", "--bootstrap-server", self.bootstrap,
                "--command-config", str(self.java_client_properties("admin")), "--add",
                "--allow-principal", f"User:{user}"]  # fmt: skip
        prefix = f"{namespace}."
        for args in (
            ["--operation", "All", "--resource-pattern-type", "prefixed", "--topic", prefix, "--group", prefix,
             "--transactional-id", prefix],
            ["--operation", "IdempotentWrite", "--cluster"],
        ):  # fmt: skip
            result = subprocess.run(
                [*base, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
            )
            if result.returncode != 0:
                raise StackError(f"granting {user} the ACLs of {namespace} failed:\n{result.stdout}{result.stderr}")
        log(f"granted User:{user} the ACLs of namespace {namespace} (prefix {prefix})")

    #: how often a first start is tried on fresh ports when a node finds one of its ports taken
    PORT_ATTEMPTS = 3

    def start(self, timeout: float = 180.0) -> KafkaCluster:
        """Make the TLS material, launch every node (they elect a controller together), wait for all.

        A port is free when it is chosen and bound only when the JVM starts, seconds later; in
        between another process may take it (CI, session 63: a test's TLS server took node 3's
        controller port, which then answered its peers with a foreign certificate). A first start
        that fails on a taken port kills the nodes, wipes their new storage and tries fresh ports."""
        started = time.monotonic()
        if self.tls is not None:
            self.tls.make()
        fresh = not any((node._ensure_workdir() / "data" / "meta.properties").exists() for node in self.nodes)
        for attempt in range(1, self.PORT_ATTEMPTS + 1):
            try:
                self._launch_all(started + timeout)
                break
            except StackError as exc:
                if not (fresh and attempt < self.PORT_ATTEMPTS and self._port_taken()):
                    raise
                log(f"kafka cluster: a port was taken before a node bound it ({exc.args[0].splitlines()[0]}); "
                    f"retrying on fresh ports ({attempt + 1}/{self.PORT_ATTEMPTS})")  # fmt: skip
                for node in self.nodes:
                    node.kill()
                    shutil.rmtree(node._ensure_workdir(), ignore_errors=True)
                self._assign_ports()
        deadline = started + timeout
        if not self.secure:  # every node in the metadata (a secured listener needs SASL first)
            _wait_until(
                lambda: kafka_ready(LOOPBACK, self.nodes[0].port or 0, brokers_wanted=len(self.nodes)),
                None, max(5.0, deadline - time.monotonic()), "the cluster's metadata", [],
            )  # fmt: skip
        mode = "SASL_SSL (SCRAM-SHA-512, ACLs)" if self.secure else "PLAINTEXT"
        log(
            f"kafka cluster of {len(self.nodes)} nodes ready at {self.bootstrap} in {time.monotonic() - started:.1f}s,"
            f" {mode}, RF {self.replication}, min ISR {self.min_insync} (logs: {self.workdir}/node*/logs)"
        )
        return self

    def _launch_all(self, deadline: float) -> None:
        for node in self.nodes:
            node.launch()
        for node in self.nodes:
            node.wait_ready(max(5.0, deadline - time.monotonic()))

    def _port_taken(self) -> bool:
        """Whether a node's log of this start says one of its listeners could not bind."""
        return any(node.logged_since_launch(b"Address already in use") for node in self.nodes)

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop of every node at once (SIGTERM, SIGKILL after ``timeout``); data kept."""
        for node in self.nodes:
            if node.proc is not None and node.running:
                node.proc.terminate()
        for node in self.nodes:
            node.stop(timeout)

    def cleanup(self) -> None:
        """Stop every node and delete the cluster's directory (kept with KADENCE_KEEP_STACK=1).
        A directory that is deleted is not worth a controlled shutdown: the nodes are killed
        (stopping three nodes one by one waited ~30 s for the last, which had no quorum left)."""
        keep = not self._own_dir or os.environ.get("KADENCE_KEEP_STACK")
        for node in self.nodes:
            node.stop() if keep else node.kill()
        if not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


# ---------------------------------------------------------------- devstack.py run


def cluster_wanted(env: Mapping[str, str]) -> bool:
    """``KADENCE_KAFKA_BROKERS`` above 1, or ``KADENCE_KAFKA_SECURITY=sasl_ssl``: a cluster."""
    security = env.get("KADENCE_KAFKA_SECURITY", "plaintext").lower()
    if security not in ("plaintext", "sasl_ssl"):
        raise StackError(f"KADENCE_KAFKA_SECURITY must be plaintext or sasl_ssl, not {security!r}")
    try:
        brokers = int(env.get("KADENCE_KAFKA_BROKERS") or 1)
    except ValueError:
        raise StackError(f"KADENCE_KAFKA_BROKERS must be a number, not {env['KADENCE_KAFKA_BROKERS']!r}") from None
    if brokers < 1:
        raise StackError(f"KADENCE_KAFKA_BROKERS must be 1 or more, not {brokers}")
    return brokers > 1 or security == "sasl_ssl"


def start_for_run(env: MutableMapping[str, str], server_props: Mapping[str, object]) -> KafkaCluster:
    """``devstack.py run``: the cluster ``cluster_wanted`` asked for; the wrapped command connects as the user
    ``kadence``, granted the ACLs of ``KADENCE_NAMESPACE`` (default ``kadence``) on a secured one."""
    secure = env.get("KADENCE_KAFKA_SECURITY", "").lower() == "sasl_ssl"
    app_password = base64.urlsafe_b64encode(os.urandom(12)).decode()
    heap = int(env.get("KADENCE_KAFKA_HEAP_MB") or 512)
    cluster = KafkaCluster(
        int(env.get("KADENCE_KAFKA_BROKERS") or 1),
        secure=secure,
        users={"kadence": app_password},
        die_with_parent=True,
        config=server_props,
        heap_mb=heap,
    )
    cluster.start()
    if secure:
        cluster.grant_namespace("kadence", env.get("KADENCE_NAMESPACE") or "kadence")
        log(f"admin client settings for Kafka's tools: {cluster.java_client_properties('admin')}")
    env.update(cluster.client_env("kadence" if secure else "admin"))
    return cluster
