#!/usr/bin/env python3
"""The dev stack's launcher (``make dev``, ``make test``, ``make bench``, ``make chaos``,
``.ci/run``). Standard library only: it runs with the system python3 before the package is
installed (it installs what the venv needs first), and loads ``devstack/services.py`` (the single
broker and Redis) and ``devstack/cluster.py`` (the replicated, secured cluster) from their files.

    python3 scripts/devstack.py run -- <command...>   # start a broker and Redis, run the command, stop both
    python3 scripts/devstack.py jars                  # only resolve the broker jars
    python3 scripts/devstack.py registry              # only build the schema registry
    python3 scripts/devstack.py deps                  # only install missing system packages

``run`` starts a cluster instead of one broker with ``KADENCE_KAFKA_BROKERS`` above 1 or
``KADENCE_KAFKA_SECURITY=sasl_ssl``; a ``KADENCE_KAFKA_BOOTSTRAP`` or ``KADENCE_REDIS_URL`` in
the environment is used instead of starting one (docs/dev-stack.md). ``run`` also starts a schema
registry (``KADENCE_DEV_SCHEMA_REGISTRY_URL``; ``KADENCE_DEV_SCHEMA_REGISTRY=0``: none), which
Kadence uses only where ``KADENCE_SCHEMA_REGISTRY_URL`` is set to it (docs/schema-registry.md).
"""

import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

_DEVSTACK = Path(__file__).resolve().parent.parent / "devstack"


def _load(name, filename):
    spec = importlib.util.spec_from_file_location(name, _DEVSTACK / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the cluster and the registry find the services under this name
    spec.loader.exec_module(module)
    return module


devstack = _load("kadence_devstack", "services.py")
_cluster = None
_registry = None


def _devregistry():
    """The schema registry module, loaded when a run starts one."""
    global _registry
    if _registry is None:
        _registry = _load("kadence_devregistry", "registry.py")
    return _registry


def _devcluster():
    """The cluster module, loaded when a run asks for a cluster."""
    global _cluster
    if _cluster is None:
        _cluster = _load("kadence_devcluster", "cluster.py")
    return _cluster


def _check_external(what, probe, value):
    """A service given by the environment must answer within 20 seconds."""
    shown = re.sub(r"//[^/@]*@", "//***@", value)  # no passwords in logs
    devstack.log(f"using the external {what} at {shown}")
    devstack._wait_until(lambda: probe(value), None, 20, f"{what} at {shown} (from the environment)", [])


def _kafka_answers(bootstrap):
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return devstack.kafka_ready(host, port)


def _terminal_already_delivered(signum):
    """A Ctrl-C typed in our terminal reached the child too (same foreground process group)."""
    try:
        return signum == signal.SIGINT and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


def cmd_run(argv):
    """Start Kafka and Redis (unless given by the environment), run argv, stop both."""
    if not argv:
        raise devstack.StackError("usage: devstack.py run -- <command...>")
    env, services, state = dict(os.environ), [], {"child": None}

    def on_signal(signum, _frame):
        if state["child"] is None:
            raise KeyboardInterrupt  # still starting: unwind and clean up
        if not _terminal_already_delivered(signum):
            state["child"].send_signal(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        env["KADENCE_KAFKA_VERSION"] = devstack.kafka_version()
        if env.get("KADENCE_REDIS_URL"):
            _check_external("Redis", devstack.redis_ready, env["KADENCE_REDIS_URL"])
        else:
            services.append(devstack.RedisServer(die_with_parent=True))
            env["KADENCE_REDIS_URL"] = services[-1].start().url
        if env.get("KADENCE_DEV_SCHEMA_REGISTRY_URL"):
            _check_external("schema registry", _devregistry().registry_ready, env["KADENCE_DEV_SCHEMA_REGISTRY_URL"])
        elif env.get("KADENCE_DEV_SCHEMA_REGISTRY", "1") != "0":
            services.append(_devregistry().SchemaRegistryServer(die_with_parent=True))
            env["KADENCE_DEV_SCHEMA_REGISTRY_URL"] = services[-1].start().url
        if env.get("KADENCE_KAFKA_BOOTSTRAP"):
            _check_external("Kafka", _kafka_answers, env["KADENCE_KAFKA_BOOTSTRAP"])
        elif _devcluster().cluster_wanted(env):
            services.append(_devcluster().start_for_run(env, devstack.server_overrides(env)))
        else:
            services.append(devstack.KafkaBroker(die_with_parent=True, config=devstack.server_overrides(env)))
            env["KADENCE_KAFKA_BOOTSTRAP"] = services[-1].start().bootstrap
            env["KADENCE_BROKER_JMX_PORT"] = str(services[-1].jmx_port)
        try:
            state["child"] = subprocess.Popen(argv, env=env)
        except OSError as exc:
            devstack.log(f"cannot run {argv[0]}: {exc.strerror}")
            return 127
        code = state["child"].wait()
        return 128 - code if code < 0 else code
    except KeyboardInterrupt:
        devstack.log("interrupted")
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)  # cleanup must not be interrupted
        for service in reversed(services):
            service.cleanup()


def main(args=None):
    args = sys.argv[1:] if args is None else args
    command, rest = (args[0], args[1:]) if args else ("help", [])
    try:
        if command == "run":
            return cmd_run(rest[1:] if rest[:1] == ["--"] else rest)
        if command == "jars":
            print(devstack.resolve_jars())
            return 0
        if command == "registry":
            print(_devregistry().resolve_registry())
            return 0
        if command == "deps":
            devstack.ensure_tools(list(devstack.APT_PACKAGES))
            return 0
    except (devstack.StackError, subprocess.CalledProcessError) as exc:
        devstack.log(f"error: {exc}")
        return 1
    print(__doc__.strip(), file=sys.stderr)
    return 0 if command in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    sys.exit(main())
