"""The dev stack: the services Kadence's own runs start on this machine, apart from the engine and
from the users' test kit. ``services`` holds a single KRaft broker and Redis (with the Maven jar
resolution, the ports and the process handling they share), ``cluster`` a replicated and
optionally secured cluster of brokers (``KafkaCluster``, ``TlsMaterial``), ``registry`` a schema
registry. ``scripts/devstack.py`` (``make dev``, ``make test``, ``make bench``, ``make chaos``,
``.ci/run``) loads these files directly, so they import only the standard library and each
other; ``kadence.testing``'s pytest plugin starts a broker with ``services`` for a user's suite.
See docs/dev-stack.md."""
