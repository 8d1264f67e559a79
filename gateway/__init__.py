"""The HTTP gateway (FastAPI on uvicorn): ``create_app(GatewayConfig(...))``."""

from .app import GatewayConfig, create_app

__all__ = ["GatewayConfig", "create_app"]
