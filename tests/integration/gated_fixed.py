"""`kadence reset --dry-run --module` target: the fixed (original) Gated code."""

from .workflows import Gated

WORKFLOWS = [Gated]
