"""Hello, update (Temporal: ``hello_update``): a validated request into a running workflow that
returns the handler's result; a rejected one records nothing."""

from __future__ import annotations

from kadence import Client, Worker, WorkflowUpdateFailedError, workflow

TASK_QUEUE = "hello-update"


@workflow.defn
class Language:
    def __init__(self) -> None:
        self.language = "english"
        self.done = False

    @workflow.update
    def set_language(self, language: str) -> str:
        previous, self.language = self.language, language
        return previous

    @set_language.validator
    def check_language(self, language: str) -> None:
        if language not in ("english", "french", "spanish"):
            raise ValueError(f"{language} is not supported")

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.language


async def main(client: Client) -> list[str]:
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[Language]):
        handle = await client.start_workflow(Language, id="hello-update", task_queue=TASK_QUEUE)
        previous = await handle.execute_update(Language.set_language, "french")
        try:
            await handle.execute_update(Language.set_language, "klingon")
            rejected = "accepted?"
        except WorkflowUpdateFailedError as err:
            rejected = "rejected" if err.rejected else "failed"
        update = await handle.start_update(Language.set_language, "spanish")  # returns once accepted
        await update.result()
        await handle.signal(Language.finish)
        return [previous, rejected, await handle.result()]
