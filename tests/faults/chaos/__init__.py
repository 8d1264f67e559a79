"""The fault-injection (chaos) suite: a load driver, a fault injector and an invariant checker.

``workflows`` holds the sample workflows and activities (effects recorded in Redis by
idempotency key), ``worker_main`` runs them in a killable worker process, ``cluster`` starts,
kills, pauses and restarts every component, ``load`` drives starts, signals and injections,
``observe`` reads the history topic, the dead-letter topic and Redis, and ``checker`` holds the
invariants (pure logic). See docs/fault-testing.md.
"""
