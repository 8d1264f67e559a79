"""Sample workflows that ship with Kadence (used by ``make dev`` and the tests)."""
