"""Reading a workflow's streams (decision 0062): ``WorkflowHandle.stream`` returns a
``WorkflowStream``, an async iterator of ``StreamEvent`` that follows the stream live and ends when
the workflow closes (after its last value), or at once for a closed workflow that never published.

Each event's ``id`` is its offset on ``{ns}.streams``: pass it as ``after=`` to resume after it
(the gateway's Server-Sent Events use it as their ``id``, so ``Last-Event-ID`` resumes there too).
Only what the engine accepted is read: an activity attempt's values come with its accepted result
and never from a failed or retried attempt; workflow code's values once, not again on replay."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kadence.topics.errors import InvalidArgumentError
from kadence.topics.stream_hub import follow_described
from kadence.topics.streams import StreamEntry, check_stream

if TYPE_CHECKING:
    from ._handle import WorkflowHandle

__all__ = ["StreamEvent", "WorkflowStream"]


@dataclasses.dataclass(frozen=True)
class StreamEvent:
    """One value published on a workflow's stream."""

    #: its place on the stream topic: ``handle.stream(..., after=id)`` resumes after it
    id: int
    stream: str
    value: Any
    run_id: str
    #: the activity whose (accepted) attempt published it; None: the workflow's code
    activity_id: str | None
    attempt: int
    #: when the engine accepted it
    time: datetime

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (``kadence stream``; the gateway's ``data:`` with the ``id``)."""
        return {**dataclasses.asdict(self), "time": self.time.isoformat(timespec="milliseconds")}


class WorkflowStream(AsyncIterator[StreamEvent]):
    """``async for event in handle.stream("progress"): ...``; also an async context manager
    (``aclose()`` stops reading early)."""

    def __init__(self, handle: WorkflowHandle, name: str | None, after: int | None, value_type: Any) -> None:
        self._handle = handle
        self._name = None if name is None else check_stream(name)
        if after is not None and (not isinstance(after, int) or isinstance(after, bool) or after < -1):
            raise InvalidArgumentError(f"after must be a stream event's id (an int >= -1), not {after!r}")
        self._after = after
        self._type = value_type
        self._reader: AsyncIterator[StreamEntry] | None = None
        self._ended = False

    def __aiter__(self) -> WorkflowStream:
        return self

    async def __aenter__(self) -> WorkflowStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _open(self) -> AsyncIterator[StreamEntry] | None:
        described = (await self._handle.describe()).to_dict()
        return follow_described(self._handle.client.engine, described, stream=self._name, after=self._after)

    async def __anext__(self) -> StreamEvent:
        if self._ended:
            raise StopAsyncIteration
        if self._reader is None:
            reader = await self._open()
            if reader is None:
                self._ended = True
                raise StopAsyncIteration
            self._reader = reader
        async for entry in self._reader:
            if entry.end:
                break
            converter = self._handle.client.converter
            return StreamEvent(
                id=entry.offset,
                stream=entry.stream,
                value=converter.from_bytes(entry.value, self._type, what=f"stream {entry.stream!r} value"),
                run_id=entry.run_id,
                activity_id=entry.activity_id,
                attempt=entry.attempt,
                time=datetime.fromtimestamp(entry.timestamp_ms / 1000, tz=UTC),
            )
        self._ended = True
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._ended = True
        if self._reader is not None:
            close = getattr(self._reader, "aclose", None)
            if close is not None:
                await close()
