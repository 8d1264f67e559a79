"""Kadence development stack: a real single-node Kafka broker (KRaft) and a redis-server.

Standard library only, so it runs with the system python3 before any virtualenv exists (the
launcher, ``scripts/devstack.py``, loads it from its file: ``run``, ``jars``, ``deps``).

As a module: ``KafkaBroker`` and ``RedisServer`` (start/stop/kill/restart, context managers);
the replicated, secured cluster (``KafkaCluster``, ``TlsMaterial``) is ``kadence.devstack.cluster``.
See docs/dev-stack.md for the environment variables and troubleshooting.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self
from urllib.parse import urlparse

if TYPE_CHECKING:
    from .cluster import KafkaCluster

DEFAULT_KAFKA_VERSION = "4.1.1"
APT_PACKAGES = {
    "java": "openjdk-17-jre-headless",
    "mvn": "maven",
    "redis-server": "redis-server",
    # the secured cluster's throw-away CA and certificates (KafkaCluster(secure=True))
    "openssl": "openssl",
    # the web console's browser tests (tests/integration/test_console_browser.py)
    "chromium": "chromium",
    # the AsyncAPI parser that checks docs/asyncapi.yaml (tools/asyncapi, tests/unit/test_asyncapi.py)
    "node": "nodejs",
    "npm": "npm",
    # the Java and Go client examples (docs/examples/clients, tests/integration/test_kafka_clients.py)
    "javac": "openjdk-17-jdk-headless",
    "go": "golang-go",
}
JVM_OPTS = [
    "-Xms256m",
    "-Xmx768m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]
LOOPBACK = "127.0.0.1"


def jmx_opts(port: int) -> list[str]:
    """JVM options serving JMX on ``port`` of the loopback only, without authentication (a dev
    stack's broker; its request metrics are read by ``bench.broker_requests``)."""
    return [
        "-Dcom.sun.management.jmxremote",
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        "-Dcom.sun.management.jmxremote.host=127.0.0.1",
        "-Djava.rmi.server.hostname=127.0.0.1",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
        "-Dcom.sun.management.jmxremote.local.only=true",
    ]


_LIVE: set[subprocess.Popen[bytes]] = set()  # processes still running, reaped at interpreter exit


class StackError(RuntimeError):
    """The stack could not be prepared or started; the message says why."""


def log(msg: object) -> None:
    """Progress and errors go to stderr, so the wrapped command owns stdout."""
    print(f"devstack: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- system packages


def ensure_tools(tools: list[str]) -> None:
    """Make sure the given executables exist; apt-get install them when running as root."""
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    packages = sorted({APT_PACKAGES[t] for t in missing})
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise StackError(
            f"missing {', '.join(missing)}; install the packages: {' '.join(packages)}"
            " (Debian/Ubuntu: sudo apt-get install -y ...)"
        )
    apt_install(packages)


def apt_install(packages: list[str]) -> None:
    """apt-get install, running apt-get update first when the package lists are empty."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    have_lists = any(Path("/var/lib/apt/lists").glob("*_Packages*"))
    log(f"installing {' '.join(packages)} with apt-get")
    if have_lists and subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode == 0:
        return
    subprocess.run(["apt-get", "update", "-q"], env=env, check=True, stdout=subprocess.DEVNULL)
    if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        raise StackError(f"apt-get install {' '.join(packages)} failed")


def java_binary() -> str:
    """The java executable (JAVA_HOME wins), checked to be Java 17 or newer."""
    java: Path | str | None = Path(os.environ.get("JAVA_HOME") or "/nonexistent", "bin", "java")
    if not Path(str(java)).exists():
        ensure_tools(["java"])
        java = shutil.which("java")
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    major = re.search(r'version "(?:1\.)?(\d+)', out)
    if not major or int(major.group(1)) < 17:
        raise StackError(f"Kafka 4.x needs Java 17+, {java} reports: {out.strip()[:80]!r}")
    return str(java)


# ---------------------------------------------------------------- broker jars

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>dev.kadence</groupId><artifactId>kafka-broker-classpath</artifactId><version>1</version>
  <dependencies>{deps}\n  </dependencies>\n</project>\n"""
DEP = "\n    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"


def kafka_version() -> str:
    return os.environ.get("KADENCE_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def cache_root() -> Path:
    return Path(os.environ.get("KADENCE_CACHE") or Path.home() / ".cache" / "kadence")


def resolve_jars(version: str | None = None) -> Path:
    """Return the lib directory holding the broker classpath, resolving it once from Maven.

    A ``.complete`` marker is written last, so an interrupted download is redone; a file
    lock keeps two concurrent resolutions from interleaving.
    """
    version = version or kafka_version()
    home = cache_root() / f"kafka-{version}"
    lib, marker = home / "lib", home / ".complete"
    # kafka-tools (AclCommand, for the secured cluster) joined the classpath later: a cache
    # resolved before it is resolved again

    def complete() -> bool:
        return marker.exists() and (lib / f"kafka-tools-{version}.jar").exists()

    if complete():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if complete():
            return lib
        marker.unlink(missing_ok=True)
        ensure_tools(["mvn"])
        java_binary()
        shutil.rmtree(lib, ignore_errors=True)
        log(f"resolving Kafka {version} jars from Maven Central into {lib} (first time only, can take a few minutes)")
        deps = [("org.apache.kafka", "kafka_2.13", version), ("org.apache.kafka", "kafka-tools", version)]
        _copy_dependencies(home, lib, deps)
        binding = _log4j_binding(lib)
        if binding:
            _copy_dependencies(home, lib, deps + binding)
        if not list(lib.glob(f"kafka_2.13-{version}.jar")) or _log4j_binding(lib):
            raise StackError(f"jar resolution in {lib} is incomplete (see {home / 'mvn.log'})")
        marker.write_text("\n".join(sorted(p.name for p in lib.iterdir())) + "\n")
        log(f"Kafka {version} jars ready ({len(list(lib.iterdir()))} jars)")
    return lib


#: what docs/examples/clients/java needs besides the JDK: the Kafka client and Apache Avro
CLIENT_JARS = (("org.apache.kafka", "kafka-clients", None), ("org.apache.avro", "avro", "1.12.2"))


def resolve_client_jars(
    version: str | None = None,
    *,
    jars: tuple[tuple[str, str, str | None], ...] = CLIENT_JARS,
    name: str = "java-client",
    what: str = "the Java client example",
) -> Path:
    """The lib directory of a Java example's classpath: ``jars`` (group, artifact, version; None:
    the broker's version) with their dependencies, resolved from Maven once into
    ``{cache}/{name}-{version}``, like ``resolve_jars``."""
    version = version or kafka_version()
    home = cache_root() / f"{name}-{version}"
    lib, marker = home / "lib", home / ".complete"
    if marker.exists():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return lib
        ensure_tools(["mvn"])
        shutil.rmtree(lib, ignore_errors=True)
        log(f"resolving {what}'s jars from Maven Central into {lib} (first time only)")
        _copy_dependencies(home, lib, [(g, a, v or version) for g, a, v in jars])
        if any(not list(lib.glob(f"{a}-*.jar")) for _g, a, _v in jars):
            raise StackError(f"jar resolution in {lib} is incomplete (see {home / 'mvn.log'})")
        marker.write_text("\n".join(sorted(p.name for p in lib.iterdir())) + "\n")
    return lib


def _copy_dependencies(home: Path, lib: Path, deps: list[tuple[str, str, str]]) -> None:
    """Write the tiny pom and run mvn dependency:copy-dependencies, with a progress line."""
    pom = home / "pom.xml"
    pom.write_text(POM.format(deps="".join(DEP.format(*d) for d in deps)))
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={lib}",
    ]
    started = time.monotonic()
    with open(home / "mvn.log", "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        while proc.poll() is None:
            time.sleep(1)
            elapsed = int(time.monotonic() - started)
            if elapsed and elapsed % 20 == 0:
                log(f"... still resolving jars ({elapsed}s)")
    if proc.returncode != 0:
        raise StackError(f"mvn failed (exit {proc.returncode}):\n{_tail(home / 'mvn.log')}")


def _log4j_binding(lib: Path) -> list[tuple[str, str, str]]:
    """Extra dependencies needed so slf4j logs through log4j2; [] when a binding is present."""
    names = [p.name for p in lib.glob("*.jar")]
    if any(n.startswith(("log4j-slf4j-impl-", "log4j-slf4j2-impl-")) for n in names):
        return []
    log4j = next((n[len("log4j-api-") : -4] for n in names if n.startswith("log4j-api-")), "2.24.3")
    slf4j = next((n[len("slf4j-api-") : -4] for n in names if n.startswith("slf4j-api-")), "1.7")
    artifact = "log4j-slf4j2-impl" if int(slf4j.split(".")[0]) >= 2 else "log4j-slf4j-impl"
    group = "org.apache.logging.log4j"
    return [(group, "log4j-core", log4j), (group, artifact, log4j)]


# ---------------------------------------------------------------- processes and probes


#: the lowest port ``free_ports`` hands out (below the kernel's ephemeral range)
LOWEST_PORT = 10_000


def free_port() -> int:
    """A loopback port nothing listens on now, for a server this stack starts (``free_ports``)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports nothing listens on now, chosen at random below the
    kernel's ephemeral range: a port from that range (a bind to port 0) can be given to another
    process's outgoing connection before the server binds it (CI, session 61: a cluster node
    failed to start with "Address already in use" while the other test worker ran clients)."""
    low, _high = _ephemeral_range()
    ports: list[int] = []
    for _ in range(100 * n):
        if len(ports) == n:
            break
        port = random.randrange(LOWEST_PORT, low) if low > LOWEST_PORT + 1000 else 0
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue
            got = s.getsockname()[1]
        if got not in ports:
            ports.append(got)
    if len(ports) < n:
        raise StackError(f"no {n} free ports on {LOOPBACK}")
    return ports


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' ports (Linux; the default elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _die_with_parent() -> None:
    """preexec_fn: have the kernel SIGTERM the child when the spawning thread dies."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _spawn(argv: list[str], logfile: Path, cwd: Path, die_with_parent: bool = False) -> subprocess.Popen[bytes]:
    """Start a service in its own session (a terminal Ctrl-C must not reach it directly)."""
    with open(logfile, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    _LIVE.add(proc)
    return proc


def _terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 30.0) -> None:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _LIVE.discard(proc)


@atexit.register
def _reap_all() -> None:
    for proc in list(_LIVE):
        _terminate(proc, 10)


def _tail(path: Path | str | None, lines: int = 40) -> str:
    try:
        text = Path(str(path)).read_text(errors="replace").splitlines()
    except OSError:
        return f"  ({path} not found)"
    # Java stack frames bury the messages ("Caused by: ..."), keep those only.
    text = [t for t in text if not t.lstrip().startswith(("at ", "... "))]
    return "\n".join(f"  | {line}" for line in text[-lines:]) or f"  ({path} is empty)"


def _wait_until(
    probe: Callable[[], object],
    proc: subprocess.Popen[bytes] | None,
    timeout: float,
    what: str,
    logs: Sequence[Path | None],
) -> None:
    """Poll ``probe()`` until it returns true; fail fast if ``proc`` dies, or on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            problem = f"{what} exited with code {proc.returncode} during startup"
            break
        try:
            if probe():
                return
        except (OSError, struct.error):
            pass
        if time.monotonic() > deadline:
            problem = f"{what} did not become ready within {timeout:.0f}s"
            break
        time.sleep(0.25)
    raise StackError(problem + "".join(f"\n{p}:\n{_tail(p)}" for p in logs))


def kafka_ready(host: str, port: int | str, timeout: float = 3.0, brokers_wanted: int = 1) -> bool:
    """True when the broker answers a Metadata (v4) request listing at least ``brokers_wanted``
    live brokers (a PLAINTEXT listener only)."""
    client = b"kadence-devstack"
    request = struct.pack(">hhih", 3, 4, 7, len(client)) + client + struct.pack(">ib", 0, 0)
    with socket.create_connection((host, int(port)), timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(request)) + request)
        stream = sock.makefile("rb")  # a short read surfaces as struct.error
        (size,) = struct.unpack(">i", stream.read(4))
        correlation, _throttle, brokers = struct.unpack_from(">iii", stream.read(size))
    return bool(correlation == 7 and brokers >= brokers_wanted)


def redis_ready(url: str, timeout: float = 3.0) -> bool:
    """True when the server at a redis:// URL answers PING with PONG (AUTH first if needed)."""
    u = urlparse(url)
    with socket.create_connection((u.hostname or LOOPBACK, u.port or 6379), timeout) as sock:
        sock.settimeout(timeout)
        if u.password:
            args = ["AUTH"] + [a for a in (u.username, u.password) if a]
            sock.sendall(f"*{len(args)}\r\n".encode() + "".join(f"${len(a)}\r\n{a}\r\n" for a in args).encode())
            sock.recv(256)
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        return sock.recv(64).startswith(b"+PONG")


# ---------------------------------------------------------------- services


class _Service:
    """Common lifecycle: a child process, a working directory, context-manager support."""

    name = "service"

    def __init__(self, workdir: str | Path | None = None, die_with_parent: bool = False) -> None:
        self.workdir = Path(workdir) if workdir else None
        self._own_dir = workdir is None
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen[bytes] | None = None

    def _ensure_workdir(self) -> Path:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"kadence-{self.name}-"))
        return self.workdir

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop (SIGTERM, then SIGKILL after ``timeout``); the data directory stays."""
        _terminate(self.proc, timeout)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, no shutdown at all (crash simulation); the data directory stays."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        _terminate(self.proc)
        self.proc = None

    def start(self, timeout: float = 120.0) -> Self:
        raise NotImplementedError

    def restart(self, timeout: float = 120.0) -> Self:
        """Stop, then start again on the same ports and the same data directory."""
        self.stop()
        return self.start(timeout)

    def cleanup(self) -> None:
        """Stop and delete the data directory we created (kept if KADENCE_KEEP_STACK=1)."""
        self.stop()
        if self._own_dir and self.workdir and not os.environ.get("KADENCE_KEEP_STACK"):
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def server_overrides(env: Mapping[str, str]) -> dict[str, str]:
    """``KADENCE_KAFKA_SERVER_PROPS``: extra server.properties entries for the dev broker, as
    ``key=value,key=value`` (for experiments, such as a broker setting's effect in ``make bench``)."""
    out = {}
    for item in filter(None, (x.strip() for x in env.get("KADENCE_KAFKA_SERVER_PROPS", "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"devstack: KADENCE_KAFKA_SERVER_PROPS: {item!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


class KafkaBroker(_Service):
    """A single-node Kafka broker in KRaft combined mode (broker + controller in one JVM)."""

    name = "kafka"

    def __init__(
        self,
        version: str | None = None,
        workdir: str | Path | None = None,
        die_with_parent: bool = False,
        config: Mapping[str, object] | None = None,
        *,
        node_id: int = 1,
        cluster: KafkaCluster | None = None,
    ) -> None:
        super().__init__(workdir, die_with_parent)
        self.version = version or kafka_version()
        self.config = dict(config or {})  # extra/overriding server.properties entries
        self.port: int | None = None
        self.controller_port: int | None = None
        self.mtls_port: int | None = None
        #: the JMX port of the dev broker (loopback only, no authentication: a dev stack's)
        self.jmx_port: int | None = None
        self.node_id = node_id
        #: the ``KafkaCluster`` this node belongs to (its ports, quorum and security), or None
        self.cluster = cluster
        self._log_mark = 0

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self.workdir / "logs" / "server.log" if self.workdir else None

    def start(self, timeout: float = 120.0) -> Self:
        """Start (formatting the store on first start) and wait until Metadata answers."""
        if self.running:
            return self
        started = time.monotonic()
        self.launch()
        self.wait_ready(timeout)
        log(
            f"kafka {self.version} node {self.node_id} ready at {self.bootstrap} in {time.monotonic() - started:.1f}s"
            f" (log: {self.log_path})"
        )
        return self

    def launch(self) -> Self:
        """Start the JVM (formatting the store first if it is new) without waiting for it."""
        if self.running:
            return self
        lib, java = resolve_jars(self.version), java_binary()
        work = self._ensure_workdir()
        if self.port is None:
            self.port, self.controller_port = free_ports(2)
        (work / "logs").mkdir(parents=True, exist_ok=True)
        self._write_config(work)
        jvm = self.cluster.jvm_opts if self.cluster is not None else JVM_OPTS
        base = [java, *jvm, f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}", "-cp", f"{lib}/*"]
        if not (work / "data" / "meta.properties").exists():
            self._format(base, work)
        if self.cluster is None:  # the dev broker: its request metrics for the bench (bench.broker_requests)
            self.jmx_port = self.jmx_port or free_port()
            base = [*base[:1], *jmx_opts(self.jmx_port), *base[1:]]
        log_path = work / "logs" / "server.log"
        self._log_mark = log_path.stat().st_size if log_path.exists() else 0
        self.proc = _spawn(
            [*base, "kafka.Kafka", str(work / "server.properties")],
            work / "logs" / "broker.out",
            work,
            self.die_with_parent,
        )
        return self

    def wait_ready(self, timeout: float = 120.0) -> Self:
        """Wait until this node serves: a Metadata answer on a PLAINTEXT listener; on a secured
        one, the server's "started" line in this start's part of its log and a TLS handshake."""
        cluster, port = self.cluster, self.port
        if port is None:
            raise StackError(f"Kafka node {self.node_id} was not launched")
        probe: Callable[[], object]
        if cluster is not None and cluster.tls is not None:
            ca_cert = cluster.tls.ca_cert
            probe = lambda: self._logged_started() and tls_ready(LOOPBACK, port, ca_cert)  # noqa: E731
        else:
            probe = lambda: kafka_ready(LOOPBACK, port)  # noqa: E731
        _wait_until(
            probe,
            self.proc,
            timeout,
            f"Kafka {self.version} node {self.node_id}",
            [self.log_path, self._ensure_workdir() / "logs" / "broker.out"],
        )
        return self

    def _logged_started(self) -> bool:
        return self.logged_since_launch(b"Kafka Server started")

    def logged_since_launch(self, text: bytes) -> bool:
        """Whether this start's part of the server log (from the last ``launch``) holds ``text``."""
        try:
            with open(str(self.log_path), "rb") as f:
                f.seek(self._log_mark)
                return text in f.read()
        except (OSError, TypeError):
            return False

    def _write_config(self, work: Path) -> None:
        """server.properties for one node that also supports transactions and compaction."""
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": work / "data",
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "transaction.max.timeout.ms": 3600000,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            # A killed broker must wait out its old session before re-registering (default 9s).
            "broker.session.timeout.ms": 4000,
            "broker.heartbeat.interval.ms": 1000,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 2,
            # Small compacted topics must get cleaned within a test's lifetime, on a small heap.
            "log.cleaner.enable": "true",
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
            "log.cleaner.backoff.ms": 500,
            "log.initial.task.delay.ms": 1000,
            "log.retention.check.interval.ms": 10000,
        }
        if self.cluster is not None:
            props.update(self.cluster.node_properties(self))
        props.update(self.config)
        (work / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (work / "log4j2.properties").write_text(
            "status = error\n"
            "appender.file.type = File\nappender.file.name = FILE\n"
            f"appender.file.fileName = {self.log_path}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.file.ref = FILE\n"
            "logger.server.name = kafka.server.KafkaRaftServer\nlogger.server.level = INFO\n"
            # KADENCE_KAFKA_REQUEST_LOG=1: one line per request (profiling: requests by API and client)
            + (
                "logger.req.name = kafka.request.logger\nlogger.req.level = DEBUG\n"
                if os.environ.get("KADENCE_KAFKA_REQUEST_LOG") == "1"
                else ""
            )
            # KADENCE_KAFKA_COORDINATOR_LOG=1: the transaction and group coordinators at INFO
            # (diagnosis: which transactions were aborted, when, and why)
            + (
                "logger.txn.name = kafka.coordinator.transaction\nlogger.txn.level = INFO\n"
                "logger.grp.name = org.apache.kafka.coordinator.group\nlogger.grp.level = INFO\n"
                if os.environ.get("KADENCE_KAFKA_COORDINATOR_LOG") == "1"
                else ""
            )
        )

    def _format(self, base: list[str], work: Path) -> None:
        """kafka.tools.StorageTool format with a fresh random cluster id."""
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if self.cluster is not None:
            cluster_id = self.cluster.cluster_id
        cmd = [*base, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(work / "server.properties")]
        if self.cluster is not None:
            cmd += self.cluster.format_args()
        result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise StackError(f"kafka StorageTool format failed:\n{result.stdout}{result.stderr}")


class RedisServer(_Service):
    """A throw-away redis-server on a loopback port, without persistence."""

    name = "redis"

    def __init__(self, workdir: str | Path | None = None, die_with_parent: bool = False) -> None:
        super().__init__(workdir, die_with_parent)
        self.port: int | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def start(self, timeout: float = 30.0) -> Self:
        if self.running:
            return self
        ensure_tools(["redis-server"])
        work = self._ensure_workdir()
        self.port = self.port or free_port()
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            LOOPBACK,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(work),
            "--daemonize",
            "no",
        ]
        self.proc = _spawn(argv, work / "redis.log", work, self.die_with_parent)
        _wait_until(lambda: redis_ready(self.url), self.proc, timeout, "redis-server", [work / "redis.log"])
        log(f"redis ready at {self.url}")
        return self


# ---------------------------------------------------------------- command line


def tls_ready(host: str, port: int | str, ca_file: Path | str, timeout: float = 3.0) -> bool:
    """True when a TLS handshake with the listener succeeds, verifying it against ``ca_file``."""
    import ssl

    ctx = ssl.create_default_context(cafile=str(ca_file))
    with socket.create_connection((host, int(port)), timeout) as sock, ctx.wrap_socket(sock, server_hostname=host):
        return True
