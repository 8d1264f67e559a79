"""``kadence.testing``: test your workflows and activities in milliseconds, without Kafka.

``WorkflowEnvironment`` runs the engine's own state machine and the SDK's own replay loop in your
test's process, on a virtual clock that skips ahead while you wait for a result, so a workflow
that sleeps for 30 days finishes at once::

    from kadence.testing import WorkflowEnvironment

    async def test_reminder_is_sent_after_a_month():
        async with WorkflowEnvironment(workflows=[Reminder], activities=[send_email]) as env:
            assert await env.client.execute_workflow(Reminder, "ann", id="r-1", task_queue="q") == "sent"

Replace an activity with a mock by registering a function of the same name
(``@activity.defn(name="send_email")``). See docs/testing.md.
"""

from kadence.topics.errors import ActivityAttemptLimitError, WorkflowTaskFailedError

from ._environment import WorkflowEnvironment
from .probes import PartitionProbes

__all__ = ["ActivityAttemptLimitError", "PartitionProbes", "WorkflowEnvironment", "WorkflowTaskFailedError"]
