"""`kadence replay --module` target: the unsafe v2 of Fees."""

from .workflows_v1 import FeesUnsafe, charge, fee

WORKFLOWS = [FeesUnsafe]
ACTIVITIES = [charge, fee]
