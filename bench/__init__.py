"""Kadence benchmarks: ``make bench`` (``python -m bench``).

Measures, against the broker given by ``KADENCE_KAFKA_BOOTSTRAP``, the engine's throughput,
per-step latency, timer lateness, memory per idle workflow, shard restore speed and recovery
time, and the raw Kafka limits of the same machine in the same run. See docs/performance.md.
"""
