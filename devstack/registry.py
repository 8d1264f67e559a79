"""The dev stack's schema registry: Apicurio Registry with its Confluent-compatible API
(decision 0056, docs/schema-registry.md), built once from Maven Central by Quarkus
(``tools/schema-registry/pom.xml``) into the dev stack's cache, and run on a loopback port with
its in-memory storage (a registry's subjects live as long as the stack).

Standard library only, like devstack: ``scripts/devstack.py run`` loads it from its file and
exports ``KADENCE_DEV_SCHEMA_REGISTRY_URL`` (not ``KADENCE_SCHEMA_REGISTRY_URL``: without it
configured, Kadence writes its own format, as before). As a module::

    from kadence.devstack.registry import SchemaRegistryServer
    with SchemaRegistryServer() as registry:
        print(registry.url)    # http://127.0.0.1:PORT/apis/ccompat/v6
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Self

if __package__:
    from . import services as _stack
else:  # loaded from its file by scripts/devstack.py, which registered devstack first
    _stack = sys.modules["kadence_devstack"]

__all__ = [
    "REGISTRY_PATH",
    "SchemaRegistryServer",
    "registry_ready",
    "resolve_registry",
    "resolve_registry_client_jars",
]

#: the registry's build (its pom and application.properties)
SOURCE = Path(__file__).resolve().parent.parent / "tools" / "schema-registry"
#: the Confluent-compatible API under the registry's root
REGISTRY_PATH = "/apis/ccompat/v6"
#: its JVM's heap: it holds a few hundred small schemas at most
HEAP_MB = 192


def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in SOURCE.rglob("*") if p.is_file() and "target" not in p.parts):
        digest.update(str(path.relative_to(SOURCE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def resolve_registry() -> Path:
    """The registry's runnable jar, built once per version of its sources (a ``.complete`` marker
    is written last, so an interrupted build is done again; a file lock keeps two from overlapping)."""
    home = _stack.cache_root() / f"schema-registry-{_source_digest()}"
    marker = home / ".complete"
    jar = home / "target" / "kadence-schema-registry-1-runner.jar"
    if marker.exists() and jar.exists():
        return jar
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and jar.exists():
            return jar
        _stack.ensure_tools(["mvn"])
        _stack.java_binary()
        for name in ("pom.xml", "src"):
            target = home / name
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
            (shutil.copytree if (SOURCE / name).is_dir() else shutil.copy)(SOURCE / name, target)
        _stack.log(f"building the schema registry from Maven Central into {home} (first time only, a few minutes)")
        started = time.monotonic()
        with open(home / "mvn.log", "w") as out:
            proc = subprocess.Popen(
                ["mvn", "-q", "-B", "-f", str(home / "pom.xml"), "package", "-DskipTests"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            while proc.poll() is None:
                time.sleep(1)
                elapsed = int(time.monotonic() - started)
                if elapsed and elapsed % 20 == 0:
                    _stack.log(f"... still building the schema registry ({elapsed}s)")
        if proc.returncode != 0 or not jar.exists():
            raise _stack.StackError(
                f"the schema registry's build failed (exit {proc.returncode}):\n{_stack._tail(home / 'mvn.log')}"
            )
        marker.write_text(f"{jar.name}\n")
        _stack.log(f"schema registry built in {time.monotonic() - started:.0f}s")
    return jar


def registry_ready(url: str, timeout: float = 3.0) -> bool:
    """The registry answers its subject list."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/subjects", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


class SchemaRegistryServer(_stack._Service):
    """A throw-away Apicurio Registry on a loopback port, storage in memory."""

    name = "schema-registry"

    def __init__(self, workdir: str | Path | None = None, die_with_parent: bool = False) -> None:
        super().__init__(workdir, die_with_parent)
        self.port: int | None = None
        #: seconds from launch to the first answer, at the last start (docs/schema-registry.md)
        self.startup_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://{_stack.LOOPBACK}:{self.port}{REGISTRY_PATH}"

    def start(self, timeout: float = 120.0) -> Self:
        if self.running:
            return self
        jar = resolve_registry()
        work = self._ensure_workdir()
        self.port = self.port or _stack.free_port()
        argv = [
            _stack.java_binary(),
            f"-Xmx{HEAP_MB}m",
            "-XX:+UseSerialGC",
            "-XX:+ExitOnOutOfMemoryError",
            f"-Dquarkus.http.port={self.port}",
            f"-Dquarkus.http.host={_stack.LOOPBACK}",
            "-jar",
            str(jar),
        ]
        started = time.monotonic()
        self.proc = _stack._spawn(argv, work / "registry.log", work, self.die_with_parent)
        _stack._wait_until(
            lambda: registry_ready(self.url), self.proc, timeout, "the schema registry", [work / "registry.log"]
        )
        self.startup_s = time.monotonic() - started
        _stack.log(f"schema registry ready at {self.url} ({self.startup_s:.1f}s)")
        return self


#: what docs/examples/clients/java/RegistryClient.java needs besides the JDK: Apicurio's Avro
#: serializer (of the registry's version; it brings Apache Avro) and the Kafka client
REGISTRY_CLIENT_JARS: tuple[tuple[str, str, str | None], ...] = (
    ("io.apicurio", "apicurio-registry-serdes-avro-serde", "2.4.2.Final"),
    ("org.apache.kafka", "kafka-clients", None),
)


def resolve_registry_client_jars(version: str | None = None) -> Path:
    """The lib directory of the Java registry example's classpath, resolved from Maven once."""
    return _stack.resolve_client_jars(
        version, jars=REGISTRY_CLIENT_JARS, name="java-registry-client", what="the Java registry example"
    )
