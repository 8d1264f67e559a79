"""The gateway's routes, one router per kind: ``workflows`` (start, signal, query, read, list
and act on runs), ``operations`` (batches, stuck runs, dead letters, builds, the codec) and
``health`` (readiness, liveness, metrics; no API key)."""
