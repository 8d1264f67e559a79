"""The collector's policy of the engine's processes (``kadence.cli.collector``): young
generations as CPython collects them, the start's objects frozen, full passes on a clock
instead of on the promotion count (the schedules bench's p99 tail was the schedules worker's
full passes, each freeing nothing: docs/performance.md, session 65)."""

from __future__ import annotations

import gc
import threading

import click
import pytest

from kadence.cli.collector import CollectorSettings, tune_collector, tune_collector_from_env
from kadence.topics import ConfigError
from kadence.topics.settings import from_env


@pytest.fixture
def collector():
    """Whatever a test does to the collector is undone after it."""
    threshold = gc.get_threshold()
    passes = []
    yield passes
    for p in passes:
        p.stop()
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.fixture
def full_collections():
    """Set whenever a full (generation 2) collection ends."""
    seen = threading.Event()

    def watch(phase, info):
        if phase == "stop" and info["generation"] == 2:
            seen.set()

    gc.callbacks.append(watch)
    yield seen
    gc.callbacks.remove(watch)


def test_zero_keeps_cpythons_policy(collector):
    before = gc.get_threshold()
    assert tune_collector(CollectorSettings(full_every_s=0)) is None
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_no_full_collection_starts_on_its_own_and_the_start_is_frozen(collector, full_collections):
    passes = tune_collector(CollectorSettings(full_every_s=3600))
    collector.append(passes)
    assert gc.get_freeze_count() > 0  # the modules, classes and functions loaded so far
    assert gc.get_threshold()[2] >= 2**31 - 1
    middle = []

    def count(phase, info):
        if phase == "stop" and info["generation"] == 1:
            middle.append(1)

    gc.callbacks.append(count)
    try:
        full_collections.clear()
        # survivors promoted by many young collections: CPython's count starts a full one
        # after 10 middle ones (and a quarter of the heap promoted)
        kept = [[i] for i in range(300_000)]
    finally:
        gc.callbacks.remove(count)
    assert len(kept) == 300_000 and len(middle) > 10
    assert not full_collections.is_set()
    assert passes is not None and passes.passes == 0


def test_the_clock_runs_full_passes(collector, full_collections):
    passes = tune_collector(CollectorSettings(full_every_s=0.05))
    collector.append(passes)
    full_collections.clear()
    assert full_collections.wait(10), "no full pass in 10 s with a clock of 50 ms"


def test_a_bad_value_is_refused_naming_the_variable(monkeypatch):
    with pytest.raises(ConfigError, match="KADENCE_GC_FULL_EVERY_S"):
        CollectorSettings(full_every_s=-1)
    monkeypatch.setenv("KADENCE_GC_FULL_EVERY_S", "often")
    with pytest.raises(click.UsageError, match="KADENCE_GC_FULL_EVERY_S"):
        tune_collector_from_env()
    monkeypatch.setenv("KADENCE_GC_FULL_EVERY_S", "120")
    assert from_env(CollectorSettings).full_every_s == 120.0


def test_a_full_pass_runs_at_exit_while_the_interpreter_is_whole(collector, full_collections, monkeypatch):
    registered = []
    monkeypatch.setattr("atexit.register", registered.append)
    collector.append(tune_collector(CollectorSettings(full_every_s=3600)))
    assert len(registered) == 1
    full_collections.clear()
    registered[0]()  # what the interpreter calls at exit, before finalization
    assert full_collections.is_set()
