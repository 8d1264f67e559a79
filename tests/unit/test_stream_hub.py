"""The stream hub's two races found on the broker (tests/integration/test_stream_events.py), made
deterministic: a reader handed its last values and the end by another thread gets them all before
it stops; a reader from a time starts no later than the first record written after the end it
read, when records arrive between the two lookups."""

from __future__ import annotations

import asyncio

from kadence.topics.config import KafkaConfig
from kadence.topics.stream_hub import StreamHub, StreamReader
from kadence.topics.streams import StreamEntry


def _entry(offset: int, *, end: bool = False) -> StreamEntry:
    return StreamEntry(offset, "w", "r", "" if end else "s", None if end else b"1", None, 0, offset, 1000, end)


async def test_values_and_the_end_handed_over_just_before_the_reader_looks_are_all_read():
    hub = StreamHub(KafkaConfig(bootstrap="unused:1", namespace="t"), "t.streams")
    reader = StreamReader(hub, "w", None, 0, lambda _e: True, asyncio.get_running_loop())
    # as the hub's thread does: the flags change at once, the items reach the queue through the loop
    assert reader.offer(_entry(0))
    assert not reader.offer(_entry(1, end=True))
    assert reader.done
    got = [e.offset async for e in reader]  # (the reader stopped at once here before the fix)
    assert got == [0, 1]


class _Lookups:
    """A lookup consumer over a partition of six old records that gains three new ones (offsets
    6-8, newer than the time asked for) between whichever two calls it gets."""

    def __init__(self) -> None:
        self.calls = 0

    def _appended(self) -> bool:
        self.calls += 1
        return self.calls > 1

    def get_watermark_offsets(self, _tp, timeout: float, cached: bool):
        return 0, 9 if self._appended() else 6

    def offsets_for_times(self, tps, timeout: float):
        tps[0].offset = 6 if self._appended() else -1  # the first new record, once it is there
        return tps


def test_a_reader_from_a_time_misses_nothing_written_during_the_lookup():
    hub = StreamHub(KafkaConfig(bootstrap="unused:1", namespace="t"), "t.streams")
    hub._lookup = _Lookups()  # type: ignore[assignment]
    # (the time first, then the end, answered 9: the reader skipped offsets 6-8)
    assert hub._offset_at(0, 1_000) == 6


async def test_a_stopped_hub_fails_its_readers_and_the_next_follow_starts_afresh():
    from kadence import BrokerUnavailableError

    hub = StreamHub(KafkaConfig(bootstrap="unused:1", namespace="t"), "t.streams")
    loop = asyncio.get_running_loop()
    live = StreamReader(hub, "w", None, 0, lambda _e: True, loop)
    waiting = StreamReader(hub, "v", None, 0, lambda _e: True, loop)
    hub._readers[0] = [live]
    hub._next[0] = 5
    hub._requests.append(("join", waiting, None))
    hub._thread = object()  # type: ignore[assignment]
    hub._stopped()
    for reader in (live, waiting):  # neither waits for a thread that is gone
        try:
            await reader.__anext__()
        except BrokerUnavailableError as exc:
            assert "resume after the last event" in str(exc)
        else:
            raise AssertionError("the reader was not told")
    assert hub._thread is None and not hub._readers and not hub._next and not hub._requests
