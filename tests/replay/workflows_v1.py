"""Version 1 of a workflow, and two later versions: one changed safely with `patched`, one not."""

from kadence import activity, workflow


@activity.defn
async def charge(amount: int) -> int:
    return amount


@activity.defn
async def fee(amount: int) -> int:
    return amount // 100


@workflow.defn
class Fees:
    @workflow.run
    async def run(self, amount: int) -> int:
        return await workflow.execute_activity(charge, amount)


@workflow.defn(name="Fees")
class FeesPatched:
    """v2, replay-safe: new runs also charge a fee; old histories take the old path."""

    @workflow.run
    async def run(self, amount: int) -> int:
        if workflow.patched("add-fee"):
            amount += await workflow.execute_activity(fee, amount)
        return await workflow.execute_activity(charge, amount)


@workflow.defn(name="Fees")
class FeesUnsafe:
    """v2 without `patched`: open and recorded runs diverge at their first activity."""

    @workflow.run
    async def run(self, amount: int) -> int:
        amount += await workflow.execute_activity(fee, amount)
        return await workflow.execute_activity(charge, amount)


@workflow.defn(name="Fees")
class FeesDeprecated:
    """v3: every run on the old path is gone; the patch call stays as deprecate_patch."""

    @workflow.run
    async def run(self, amount: int) -> int:
        workflow.deprecate_patch("add-fee")
        amount += await workflow.execute_activity(fee, amount)
        return await workflow.execute_activity(charge, amount)


WORKFLOWS = [Fees]
