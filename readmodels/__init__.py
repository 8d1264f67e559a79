"""Read models: the Redis projections' readers and their key layout.

The visibility projection (one record per run, listed and counted by type, status, time and
search attributes) and the history read model (each run's events, paged), as the gateway, the
CLI and the batch operations read them; the writers are in ``kadence.connectors``. An adapter
over Redis: imports only ``kadence.topics`` (errors, serialization) and ``kadence.schemas``.
"""

from .history import HistoryPage, HistoryReadModel
from .keys import ProjectionKeys
from .visibility import VisibilityFilter, VisibilityReader, projection_lag

__all__ = [
    "HistoryPage",
    "HistoryReadModel",
    "ProjectionKeys",
    "VisibilityFilter",
    "VisibilityReader",
    "projection_lag",
]
