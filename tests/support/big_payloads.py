"""Large payloads' shared workflow: 5 MB through a start, an activity, a signal and a result."""

from __future__ import annotations

import os
from datetime import timedelta

from kadence import activity, workflow

FIVE_MB = os.urandom(5 * 1024 * 1024 // 2).hex()  # 5 MiB of text
OTHER_FIVE_MB = FIVE_MB.upper()
T = timedelta(seconds=10)


@activity.defn
async def reverse(blob: str) -> str:
    return blob[::-1]


@workflow.defn
class BigMover:
    def __init__(self) -> None:
        self.extra: str | None = None

    @workflow.signal
    def more(self, blob: str) -> None:
        self.extra = blob

    @workflow.run
    async def run(self, blob: str) -> list:
        back = await workflow.execute_activity(reverse, blob, start_to_close_timeout=T)
        await workflow.wait_condition(lambda: self.extra is not None)
        return [back[::-1] == blob, len(back), self.extra]
