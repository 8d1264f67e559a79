"""Hello, method activities (Temporal: ``hello_activity_method``): activities that share a
dependency are methods of one object, registered bound to it."""

from __future__ import annotations

from datetime import timedelta

from kadence import Client, Worker, activity, workflow

TASK_QUEUE = "hello-method"


class Database:
    def __init__(self) -> None:
        self.rows: list[str] = []

    def insert(self, row: str) -> int:
        self.rows.append(row)
        return len(self.rows)


class DatabaseActivities:
    def __init__(self, db: Database) -> None:
        self.db = db

    @activity.defn
    async def store(self, row: str) -> int:
        return self.db.insert(row)


@workflow.defn
class StoreRows:
    @workflow.run
    async def run(self, rows: list[str]) -> int:
        count = 0
        for row in rows:
            count = await workflow.execute_activity_method(
                DatabaseActivities.store, row, start_to_close_timeout=timedelta(seconds=10)
            )
        return count


async def main(client: Client) -> int:
    acts = DatabaseActivities(Database())
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[StoreRows], activities=[acts.store]):
        return await client.execute_workflow(StoreRows, ["a", "b", "c"], id="hello-method", task_queue=TASK_QUEUE)
