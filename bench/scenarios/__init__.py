"""One module per scenario; each exposes ``async def run(ctx) -> dict``."""
