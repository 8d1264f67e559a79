"""`kadence replay --module` target: the replay-safe v2 of Fees (behind `workflow.patched`)."""

from .workflows_v1 import FeesPatched, charge, fee

WORKFLOWS = [FeesPatched]
ACTIVITIES = [charge, fee]
