"""An activity that publishes on its workflow's stream and fails its first two attempts, shared
by the unit (``kadence.testing``) and broker tests of workflow streams."""

from __future__ import annotations

from kadence import activity


@activity.defn
async def chatty(n: int) -> str:
    """Publishes ``n`` values tagged with the attempt, then fails unless it is attempt 3 or later."""
    attempt = activity.info().attempt
    for i in range(n):
        activity.publish("tokens", f"attempt {attempt} token {i}")
    if attempt < 3:
        raise RuntimeError(f"attempt {attempt} fails after publishing")
    return f"done on attempt {attempt}"
