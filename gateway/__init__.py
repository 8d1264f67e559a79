"""The HTTP gateway (FastAPI on uvicorn): ``create_app(GatewayConfig(...))``; API keys in Redis
(``ApiKeyStore``, managed with ``kadence keys``); see docs/gateway.md."""

from .app import create_app
from .config import GatewayConfig, RateLimit, ReadYourWrites
from .consistency import ConsistencyToken
from .keys import ApiKey, ApiKeyStore

__all__ = ["ApiKey", "ApiKeyStore", "ConsistencyToken", "GatewayConfig", "RateLimit", "ReadYourWrites", "create_app"]
