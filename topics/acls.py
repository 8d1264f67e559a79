"""The Kafka ACLs each Kadence component needs, for a broker with an authorizer (docs/deploy.md,
"ACLs"); ``kadence acls`` prints them as Kafka's ``kafka-acls.sh`` commands or creates them.

Every topic, consumer group and transactional ID of a namespace lies under the prefix
``{namespace}.``, so each rule is a prefixed or literal pattern under it. What each component
does there, and so what it is granted:

- ``processor``: reads ``commands``, ``state``, ``history``, ``builds``, ``queue_limits`` and
  ``concurrency``; writes ``history``, ``state``, ``concurrency``, ``streams``, ``replies``, ``dlq``, the timer
  tiers and the task topics (creating the topics of a child's new task queue, and
  ``concurrency``, ``streams`` and ``queue_limits`` in a namespace made before them); its group ``{ns}.processor``; transactions as
  ``{ns}.processor.{instance}``; reads the committed offsets of the worker groups (the build
  backlog gauges).
- ``timers``: reads the timer tiers, writes ``commands``, ``dlq`` and the tiers; its group
  ``{ns}.timers``.
- ``worker``: reads its task topics, writes ``commands`` (creating its task queue's topics);
  its groups ``{ns}.worker.*``; activity results in transactions as ``{ns}.worker.{identity}.activities``.
- ``client`` (the SDK's ``Client``, the gateway, the CLI's workflow commands): writes
  ``commands``, reads ``replies``, ``history``, ``state`` and ``streams`` (history, describe
  and stream reads).
- ``projections``: reads ``history`` as the group ``{ns}.projections``; Faust creates and uses
  one topic of its own, ``{ns}.projections-__assignor-__leader``.
- ``bridge``: writes ``commands`` (creating a mapped task queue's topics), its groups
  ``{ns}.bridge.*``; the domain topics it maps are the user's, granted READ separately.
- ``archiver``: reads ``history``, writes ``commands`` (purges); its group ``{ns}.archiver``.
- ``admin``: ``kadence topics apply`` creates the namespace's topics.

Every component also reads through consumers without a group of their own (assign-only
readers, ``{ns}.nogroup.{client id}``), and every producer is idempotent (IDEMPOTENT_WRITE on
the cluster; brokers from Kafka 3.0 accept WRITE on a topic instead).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from .config import KafkaConfig
from .errors import BrokerUnavailableError, KafkaAuthorizationError
from .kafka_access import refusal_of

__all__ = ["COMPONENTS", "AclRule", "acl_rules", "apply_acls", "kafka_acls_commands"]

#: the components ``acl_rules`` knows, in the order the docs list them
COMPONENTS = ("processor", "timers", "worker", "client", "projections", "bridge", "archiver", "admin")


@dataclass(frozen=True)
class AclRule:
    """Allow ``operations`` on a resource: ``kind`` is ``topic``, ``group``,
    ``transactional-id`` or ``cluster``; ``pattern`` is ``prefixed`` or ``literal``."""

    kind: str
    name: str
    pattern: str
    operations: tuple[str, ...]


def acl_rules(namespace: str, component: str) -> list[AclRule]:
    """What ``component`` needs in ``namespace`` (see the module docstring)."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown component {component!r}; one of {', '.join(COMPONENTS)}")
    ns = f"{namespace}."
    read_write = ("READ", "WRITE", "DESCRIBE")
    nogroup = AclRule("group", f"{ns}nogroup.", "prefixed", ("READ",))
    idempotent = AclRule("cluster", "kafka-cluster", "literal", ("IDEMPOTENT_WRITE",))
    if component == "admin":
        return [AclRule("topic", ns, "prefixed", ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS"))]
    if component == "projections":
        leader = f"{ns}projections-__assignor-__leader"
        return [
            AclRule("topic", f"{ns}history", "literal", ("READ", "DESCRIBE")),
            AclRule("topic", leader, "literal", ("CREATE", "READ", "WRITE", "DESCRIBE")),
            AclRule("group", f"{ns}projections", "literal", ("READ", "DESCRIBE")),
            nogroup,
        ]
    rules = {
        "processor": [
            AclRule("topic", ns, "prefixed", (*read_write, "CREATE")),
            AclRule("group", f"{ns}processor", "literal", ("READ",)),
            AclRule("group", f"{ns}worker.", "prefixed", ("DESCRIBE",)),
            AclRule("transactional-id", f"{ns}processor.", "prefixed", ("WRITE", "DESCRIBE")),
        ],
        "timers": [
            AclRule("topic", ns, "prefixed", read_write),
            AclRule("group", f"{ns}timers", "literal", ("READ",)),
        ],
        "worker": [
            AclRule("topic", ns, "prefixed", (*read_write, "CREATE")),
            AclRule("group", f"{ns}worker.", "prefixed", ("READ",)),
            AclRule("transactional-id", f"{ns}worker.", "prefixed", ("WRITE", "DESCRIBE")),
        ],
        "client": [AclRule("topic", ns, "prefixed", read_write)],
        "bridge": [
            AclRule("topic", ns, "prefixed", (*read_write, "CREATE")),
            AclRule("group", f"{ns}bridge.", "prefixed", ("READ",)),
        ],
        "archiver": [
            AclRule("topic", ns, "prefixed", read_write),
            AclRule("group", f"{ns}archiver", "literal", ("READ",)),
        ],
    }[component]
    return [*rules, nogroup, idempotent]


def kafka_acls_commands(
    namespace: str, component: str, principal: str, *, command_config: str = "admin.properties"
) -> list[str]:
    """``kafka-acls.sh`` command lines that create ``component``'s rules for ``principal``."""
    out = []
    for rule in acl_rules(namespace, component):
        resource = ["--cluster"] if rule.kind == "cluster" else [f"--{rule.kind}", rule.name]
        args = [
            "kafka-acls.sh", "--bootstrap-server", "$BOOTSTRAP", "--command-config", command_config, "--add",
            "--allow-principal", principal, *resource, "--resource-pattern-type", rule.pattern,
        ]  # fmt: skip
        for op in rule.operations:
            args += ["--operation", op.title().replace("_", "")]  # kafka-acls.sh's spelling: IdempotentWrite
        out.append(" ".join(a if a == "$BOOTSTRAP" else shlex.quote(a) for a in args))
    return out


_RESOURCE_TYPES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional-id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,  # the cluster resource (librdkafka calls it BROKER)
}


def apply_acls(config: KafkaConfig, components: Iterable[str], principal: str, timeout: float = 30.0) -> int:
    """Create the rules of ``components`` for ``principal`` in ``config``'s namespace (allow, any
    host); creating one that exists changes nothing. Returns how many bindings were sent. The
    connecting principal needs ALTER on the cluster (``KafkaAuthorizationError`` otherwise)."""
    bindings = []
    seen: set[tuple[str, str, str, str]] = set()
    for component in components:
        for rule in acl_rules(config.namespace, component):
            for op in rule.operations:
                if (rule.kind, rule.name, rule.pattern, op) in seen:  # components share some rules
                    continue
                seen.add((rule.kind, rule.name, rule.pattern, op))
                bindings.append(
                    AclBinding(
                        _RESOURCE_TYPES[rule.kind],
                        rule.name,
                        ResourcePatternType.PREFIXED if rule.pattern == "prefixed" else ResourcePatternType.LITERAL,
                        principal,
                        "*",
                        AclOperation[op],
                        AclPermissionType.ALLOW,
                    )
                )
    conf = config.base()
    admin = AdminClient(conf)
    for binding, future in admin.create_acls(bindings, request_timeout=timeout).items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            refused = refusal_of(conf, admin)
            if refused is not None:
                raise refused from exc
            err = exc.args[0]
            if "AUTHORIZATION" in err.name():
                raise KafkaAuthorizationError(
                    f"creating ACLs needs ALTER on the cluster; {err.str()} ({binding.name})"
                ) from exc
            raise BrokerUnavailableError(f"cannot create the ACL on {binding.name}: {err.str()}") from exc
    return len(bindings)
