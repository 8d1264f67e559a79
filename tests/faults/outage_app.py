"""Workflows and activities for ``kadence worker --module tests.faults.outage_app`` (the broker
outage test runs its worker as the CLI process a deployment would)."""

from tests.integration.workflows import SleepThenAct, ThreeSteps, add, double

WORKFLOWS = [SleepThenAct, ThreeSteps]
ACTIVITIES = [add, double]
