"""Reading a process's Prometheus metrics over HTTP in the broker tests: one scraper, parsed by
prometheus-client's own text parser."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families


def samples(port: int) -> list | None:
    """Every sample ``http://127.0.0.1:{port}/metrics`` serves; None while nothing answers there
    (the process is still starting)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.TransportError:
        return None
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _matching(port: int, name: str, labels: dict[str, str]) -> list[float] | None:
    found = samples(port)
    if found is None:
        return None
    return [s.value for s in found if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def sample_value(port: int, name: str, **labels: str) -> float | None:
    """The first sample named ``name`` whose labels include ``labels``; None if there is none yet."""
    values = _matching(port, name, labels)
    return values[0] if values else None


def sample_sum(port: int, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels`` (0 before any)."""
    return sum(_matching(port, name, labels) or [])


async def sample_value_async(port: int, name: str, **labels: str) -> float | None:
    return await asyncio.get_running_loop().run_in_executor(None, lambda: sample_value(port, name, **labels))


async def sample_sum_async(port: int, name: str, **labels: str) -> float:
    return await asyncio.get_running_loop().run_in_executor(None, lambda: sample_sum(port, name, **labels))
