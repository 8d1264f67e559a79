"""Network helpers of the tests."""

from __future__ import annotations

from kadence.devstack.services import free_ports

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server a test starts), outside
    the ephemeral range (``kadence.devstack.services.free_ports``)."""
    return free_ports(1)[0]
