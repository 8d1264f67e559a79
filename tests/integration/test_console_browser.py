"""The web console in headless Chromium (Debian's package, driven by Playwright) against a real
gateway, broker, Redis, processor, projection and worker (#17): sign in, list and filter, open a
run and watch its timeline grow while it runs, signal, pause and unpause, terminate, reset a
closed run after its dry run, redrive a dead letter; a key of another namespace sees none of it.

With KADENCE_UI_SCREENSHOTS=1 it also saves the main pages to docs/ui/ (docs/ui.md shows them)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from confluent_kafka import Producer
from playwright.async_api import Page, async_playwright, expect

from kadence import Client, Limit, Priority, Worker, activity, workflow
from kadence.topics import Catalogue

from .conftest import wait_until
from .gateway_support import auth, checked_client, make_key, redis_url
from .workflows import ThreeSteps, add, double

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ui"
SHOTS = os.environ.get("KADENCE_UI_SCREENSHOTS") == "1"


@activity.defn
async def pack(order: str) -> str:
    return f"packed {order}"


@workflow.defn
class ConsoleOrder:
    def __init__(self) -> None:
        self.approved_by: str | None = None
        self.shipped = False

    @workflow.signal
    def approve(self, who: str) -> None:
        self.approved_by = who

    @workflow.signal
    def ship(self) -> None:
        self.shipped = True

    @workflow.query
    def state(self) -> dict:
        return {"approved_by": self.approved_by, "shipped": self.shipped}

    @workflow.run
    async def run(self, order: str) -> dict:
        await workflow.wait_condition(lambda: self.approved_by is not None)
        packed = await workflow.execute_activity(pack, order, start_to_close_timeout=timedelta(seconds=30))
        await workflow.wait_condition(lambda: self.shipped)
        return {"order": order, "packed": packed, "approved_by": self.approved_by}


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "Debian's chromium is not installed (scripts/devstack.py deps installs it)"
    return path


async def _shot(page: Page, name: str) -> None:
    if SHOTS:
        DOCS.mkdir(exist_ok=True)
        await page.screenshot(path=str(DOCS / f"{name}.png"), full_page=True)


async def _sign_in(page: Page, base: str, key: str) -> None:
    await page.goto(f"{base}/ui/workflows")
    await expect(page.locator("h1")).to_have_text("Sign in")
    await page.fill("#key", key)
    await page.click("#login button")
    await expect(page.locator("h1")).to_have_text("Workflows")


async def test_the_console_in_a_browser(gateway_url, api_key, gw_config, gw_projection):
    tag = uuid.uuid4().hex[:6]
    queue = f"console-{tag}"
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(
            client, task_queue=queue, workflows=[ConsoleOrder, ThreeSteps], activities=[pack, add, double]
        ):
            orders = [
                await client.start_workflow(
                    ConsoleOrder,
                    f"o-{i}",
                    id=f"order-{i}-{tag}",
                    task_queue=queue,
                    search_attributes={"tag": tag, "region": "eu" if i else "us"},
                )
                for i in range(3)
            ]
            done = await client.start_workflow(
                ThreeSteps, 1, id=f"steps-{tag}", task_queue=queue, search_attributes={"tag": tag}
            )
            await done.result(timeout=60)

            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
                try:
                    page = await browser.new_page(viewport={"width": 1400, "height": 900})
                    page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))
                    await _check_console(page, gateway_url, api_key, gw_config, client, orders, done, tag)
                    await _check_other_namespace(browser, gateway_url, tag, gw_config.namespace)
                finally:
                    await browser.close()
    finally:
        await client.close()


async def _check_console(page, base, key, gw_config, client, orders, done, tag):
    # a wrong key is refused on the sign-in page
    await page.goto(f"{base}/ui/login")
    await page.fill("#key", "kdn_not_a_key")
    await page.click("#login button")
    await expect(page.locator("#login-error")).to_contain_text("not valid")
    await _sign_in(page, base, key)

    # the list, filtered by a search attribute, with counts; then by status
    async def listed():
        await page.goto(f"{base}/ui/workflows?search=tag={tag}")
        return await page.locator("#runs tr.run").count() == 4

    await wait_until(listed, 60, "the four runs in the console's list")
    await expect(page.locator("#counts")).to_contain_text("4 runs")
    await _shot(page, "workflows")
    await page.fill("input[name=search]", f"tag={tag},region=eu")
    await page.select_option("select[name=status]", "running")
    await page.click("#filters button")
    await expect(page.locator("#runs tr.run")).to_have_count(2)
    await page.select_option("select[name=status]", "completed")
    await page.fill("input[name=search]", f"tag={tag}")
    await page.click("#filters button")
    await expect(page.locator("#runs tr.run")).to_have_count(1)
    await expect(page.locator("#runs")).to_contain_text(f"steps-{tag}")

    # a running order: its timeline grows while the page is open (signal sent from outside)
    order = orders[0]
    await page.goto(f"{base}/ui/workflows/{order.id}")
    await expect(page.locator("#status")).to_have_text("running")
    await expect(page.locator("#timeline")).to_contain_text("workflow task")
    await order.signal("approve", "ann")
    await expect(page.locator("#timeline")).to_contain_text("signal approve", timeout=15_000)
    await expect(page.locator("#timeline")).to_contain_text("activity pack", timeout=15_000)
    await expect(page.locator("#timeline li.activity")).to_contain_text("completed", timeout=15_000)
    # an event's detail on click: the activity's result, decoded
    await page.locator("#timeline li.activity summary").first.click()
    await expect(page.locator("#timeline li.activity pre").last).to_contain_text("packed o-0")
    # the query box
    await page.fill("#query-name", "state")
    await page.click("#query")
    await expect(page.locator("#query-result")).to_contain_text('"approved_by": "ann"')
    await _shot(page, "workflow")

    # pause, then unpause, with the buttons; the list shows the paused run
    await page.fill("#reason", "checking stock")
    await page.click("#pause")
    await expect(page.locator("#paused")).to_be_visible()
    await page.goto(f"{base}/ui/workflows?search=tag={tag}&paused=true")
    await expect(page.locator("#runs tr.run")).to_have_count(1, timeout=15_000)
    await page.goto(f"{base}/ui/workflows/{order.id}")
    await page.click("#unpause")
    await expect(page.locator("#paused")).to_have_count(0)

    # signal from the form: the run completes and the page shows its result
    await page.fill("#signal-name", "ship")
    await page.click("#signal")
    assert (await order.result(timeout=30))["approved_by"] == "ann"
    await page.goto(f"{base}/ui/workflows/{order.id}")
    await expect(page.locator("#result")).to_contain_text('"packed": "packed o-0"')
    # the run's input without expanding its start event; the chart; the activity's attempts
    await expect(page.locator("#run-input")).to_contain_text('"o-0"')
    await expect(page.locator("#chart .bar-row.activity")).to_contain_text("activity pack")
    await expect(page.locator("#chart .bar-row.task").first).to_be_visible()
    await expect(page.locator("#timeline li.activity .attempts")).to_have_text("· 1 attempt")
    box = await page.locator("#chart .bar-row.activity .bar").bounding_box()
    assert box is not None and box["width"] >= 2 and box["height"] >= 8  # drawn, not collapsed
    await _shot(page, "timeline-chart")
    # the list shows each run's ID and duration; /ui/batches leads to the list, not a 405
    await page.goto(f"{base}/ui/batches")
    await expect(page.locator("h1")).to_have_text("Workflows")
    await expect(page.locator("#runs thead")).to_contain_text("Duration")
    await page.goto(f"{base}/ui/workflows?search=tag={tag}&type=ThreeSteps")
    await expect(page.locator("#counts")).to_contain_text("1 run")
    await expect(page.locator("#counts")).not_to_contain_text("1 runs")
    await expect(page.locator("#runs tr.run td.run-id")).to_have_text(done.run_id[:8])

    # terminate another order
    await page.goto(f"{base}/ui/workflows/{orders[1].id}")
    await page.fill("#reason", "customer left")
    await page.click("#terminate")
    await expect(page.locator("#status")).to_have_text("terminated")

    # reset the completed ThreeSteps run: the dry run's plan, then the reset
    await page.goto(f"{base}/ui/workflows/{done.id}")
    await expect(page.locator("#status")).to_have_text("completed")
    # a crafted post with an event that is no number: a notice and a 400, nothing reset
    bad = await page.request.post(
        f"{base}/ui/workflows/{done.id}/action",
        form={"action": "reset", "to_event": "abc", "reason": "x"},
        headers={"Origin": base},
    )
    assert bad.status == 400 and "is not a number" in await bad.text()
    first_point = (await page.locator("#reset-point option").all_inner_texts())[-1]
    await page.select_option("#reset-point", label=first_point)
    await page.fill("#reset-reason", "rerun with the fix")
    await page.click("#reset-dry-run")
    await expect(page.locator("#reset-plan")).to_contain_text("completed run")
    await _shot(page, "reset-plan")
    await page.click("#reset-confirm")
    new_run = client.get_workflow_handle(done.id)
    assert await new_run.result(timeout=30) == 104
    assert new_run.run_id != done.run_id
    # the open page reloads itself when the run it follows closes
    await expect(page.locator("#status")).to_have_text("completed", timeout=15_000)
    await expect(page.locator("#timeline")).to_contain_text("WorkflowExecutionCompleted")

    # a dead letter (garbage on the commands topic), redriven from the console
    producer = Producer(gw_config.producer())
    producer.produce(Catalogue(gw_config).commands, b"\x00not a command " + tag.encode(), f"garbage-{tag}".encode())
    producer.flush(10)

    async def dead_lettered():
        await page.goto(f"{base}/ui/dead-letters")
        return await page.locator(f"tr.dead-letter.pending:has-text('garbage-{tag}')").count() >= 1

    await wait_until(dead_lettered, 60, "the garbage record in the dead letters")
    await _shot(page, "dead-letters")
    await page.locator(f"tr.dead-letter.pending:has-text('garbage-{tag}') button.redrive").first.click()
    await expect(page.locator("#notice")).to_contain_text("redriven")
    await expect(page.locator(f"tr.dead-letter.redriven:has-text('garbage-{tag}')")).to_have_count(1)

    # the other operator pages answer
    for path, heading in (("stuck", "Stuck workflows"), ("builds", "Builds and backlogs")):
        await page.goto(f"{base}/ui/{path}")
        await expect(page.locator("h1")).to_have_text(heading)
    await expect(page.locator("#builds")).to_contain_text(f"console-{tag}")
    await expect(page.locator("#queues")).to_contain_text(f"console-{tag}")  # its backlogs, per queue

    # a queue's rate limits, set and lifted from the form (bad input: a notice, nothing changes)
    await page.fill("#limit-queue", f"console-{tag}")
    await page.fill("#limit-rate", "12")
    await page.fill("#limit-types", "charge=3")
    await page.fill("#limit-reason", "from the console")
    await page.click("#limit-set")
    await expect(page.locator("#notice")).to_contain_text(f"limits of console-{tag} set")
    row = page.locator(f"#queues tr:has-text('console-{tag}') td.rate-limit")
    await expect(row).to_contain_text("12/s, charge=3/s")
    await expect(row).to_contain_text("from the console")
    await page.fill("#limit-queue", f"console-{tag}")
    await page.fill("#limit-rate", "-4")
    await page.click("#limit-set")
    await expect(page.locator("#notice")).to_contain_text("not changed")
    await expect(row).to_contain_text("12/s, charge=3/s")
    await _shot(page, "queue-limits")
    await page.fill("#limit-queue", f"console-{tag}")
    await page.click("#limit-lift")
    await expect(page.locator("#notice")).to_contain_text(f"limits of console-{tag} lifted")
    await expect(row).to_have_text("")

    # concurrency limits: one run of a max-1 key holds its slot (it waits for its approval), the
    # next waits for it; the page lists the key, and the key's page who holds and who waits
    limited = [
        await client.start_workflow(
            ConsoleOrder,
            f"l-{i}",
            id=f"limited-{i}-{tag}",
            task_queue=f"console-{tag}",
            concurrency=[Limit("console", tag, max=1)],
        )
        for i in range(2)
    ]
    await wait_until(lambda: _waits(limited[1]), 60, "the second limited run to wait for its slot")
    await page.goto(f"{base}/ui/workflows/{limited[1].id}")
    await expect(page.locator("#waits")).to_have_text(
        f"waiting for a slot of console={tag}: 1 of 1 in use, 0 waiting before it"
    )
    # and a rate limit of one an hour: the second run is admitted an hour later
    rated = [
        await client.start_workflow(
            ConsoleOrder,
            f"r-{i}",
            id=f"rated-{i}-{tag}",
            task_queue=f"console-{tag}",
            concurrency=[Limit("hourly", tag, max=1, per=timedelta(hours=1))],
        )
        for i in range(2)
    ]
    await wait_until(lambda: _throttled(rated[1]), 60, "the second rated run to be admitted for later")
    await page.goto(f"{base}/ui/workflows/{rated[1].id}")
    await expect(page.locator("#throttled")).to_contain_text("its code runs at ")
    # a run's priority (decision 0060) is on its page
    urgent = await client.start_workflow(
        ConsoleOrder,
        "u",
        id=f"urgent-{tag}",
        task_queue=f"console-{tag}",
        priority=Priority(1, fairness_key="acme", fairness_weight=2.0),
    )
    await page.goto(f"{base}/ui/workflows/{urgent.id}")
    await expect(page.locator("#priority")).to_have_text("level 1, fairness key acme (weight 2.0)")
    await urgent.terminate(reason="console test done")
    await page.goto(f"{base}/ui/limits")
    await expect(page.locator("h1")).to_have_text("Concurrency and rate limits")
    rate_row = page.locator(f"#limits tr:has-text('hourly={tag}')")
    await expect(rate_row.locator("td").nth(1)).to_have_text("rate: 1 per 3600 s")
    await expect(rate_row.locator("td").nth(4)).to_have_text("1")  # admitted for later
    key_row = page.locator(f"#limits tr:has-text('console={tag}')")
    await expect(key_row.locator("td").nth(1)).to_have_text("concurrency")
    await expect(key_row.locator("td").nth(2)).to_have_text("1")
    await expect(key_row.locator("td").nth(4)).to_have_text("1")
    await key_row.locator("a").click()
    await expect(page.locator("table.entries").nth(0)).to_contain_text(f"limited-0-{tag}")
    await expect(page.locator("table.entries").nth(1)).to_contain_text(f"limited-1-{tag}")
    await _shot(page, "concurrency-limits")
    # an operator raises the key's max from its page: the waiting run is admitted
    await page.locator("#limit-max input[name=max]").fill("2")
    await page.locator("#limit-max input[name=reason]").fill("console test")
    await page.locator("#set-max").click()
    await expect(page.locator("#notice")).to_contain_text(f"the max of concurrency:console={tag} set to 2")
    await expect(page.locator("p.override")).to_contain_text("max 2 set by gateway:")
    await wait_until(lambda: _admitted(limited[1]), 60, "the waiting run to be admitted by the raised max")
    await page.locator("#limit-max input[name=max]").fill("x")
    await page.locator("#set-max").click()
    await expect(page.locator("#notice")).to_contain_text("is not a number")
    for handle in limited + rated:
        await handle.terminate(reason="console test done")


async def _waits(handle) -> bool:
    return ((await handle.describe()).waiting_for_slot or {}).get("reason") is not None


async def _admitted(handle) -> bool:
    return (await handle.describe()).concurrency_slots != []


async def _throttled(handle) -> bool:
    return (await handle.describe()).throttled_until is not None


async def _check_other_namespace(browser, base, tag, first_namespace):
    """A key of another namespace lists nothing of this one, and cannot sign in to it."""
    from kadence.topics import KafkaConfig

    other = f"o{uuid.uuid4().hex[:8]}"
    Catalogue(KafkaConfig(bootstrap=os.environ["KADENCE_KAFKA_BOOTSTRAP"], namespace=other, partitions=4)).apply()
    key = make_key(other)
    page = await browser.new_page()
    await page.goto(f"{base}/ui/login")
    await page.fill("#key", key)
    await page.fill("#ns", first_namespace)
    await page.click("#login button")
    await expect(page.locator("#login-error")).to_contain_text("namespace")
    await _sign_in(page, base, key)
    await expect(page.locator("#namespace")).to_have_text(other)
    await page.goto(f"{base}/ui/workflows?search=tag={tag}")
    await expect(page.locator("#runs tr.run")).to_have_count(0)
    await page.goto(f"{base}/ui/workflows?type=ConsoleOrder")
    await expect(page.locator("#runs tr.run")).to_have_count(0)


@workflow.defn
class ConsoleReport:
    @workflow.run
    async def run(self) -> str:
        return "done"


async def test_the_schedules_pages_in_a_browser(gateway_url, api_key, gw_config, gw_projection):
    from kadence import ScheduleSpec, schedule_action
    from kadence.operations import Schedule, schedule_activities
    from kadence.topics.schedules import SCHEDULES_TASK_QUEUE

    tag = uuid.uuid4().hex[:6]
    sid = f"console-{tag}"
    client = await Client.connect(config=gw_config)
    try:
        async with (
            Worker(
                client, task_queue=SCHEDULES_TASK_QUEUE, workflows=[Schedule], activities=schedule_activities(client)
            ),
            Worker(client, task_queue=f"reports-{tag}", workflows=[ConsoleReport]),
        ):
            handle = await client.create_schedule(
                sid,
                spec=ScheduleSpec(cron=["0 6 * * *"], time_zone="Europe/Paris"),
                action=schedule_action(ConsoleReport, task_queue=f"reports-{tag}"),
                paused=True,
                note="set up by the test",
            )
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
                try:
                    page = await browser.new_page(viewport={"width": 1400, "height": 900})
                    page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))
                    base = gateway_url
                    await _sign_in(page, base, api_key)
                    link = page.locator(f"#schedules a:has-text('{sid}')")

                    async def listed() -> bool:  # the list is the visibility projection's
                        await page.goto(f"{base}/ui/schedules")
                        return await link.count() == 1

                    await wait_until(listed, 60, "the schedule in the console's list", interval=1.0)
                    await expect(page.locator("h1")).to_have_text("Schedules")
                    await link.click()
                    await expect(page.locator("h1")).to_have_text(f"Schedule {sid}")
                    await expect(page.locator("#state")).to_have_text("paused: set up by the test")
                    await expect(page.locator("#facts")).to_contain_text("0 6 * * *")
                    await expect(page.locator("#next")).to_contain_text("None while paused")
                    await page.locator("#trigger").click()
                    await expect(page.locator("#notice")).to_have_text("trigger: done")
                    await wait_until(lambda: _ran(handle), 30, "the triggered run")
                    await page.reload()
                    await expect(page.locator("#recent")).to_contain_text("completed")
                    await expect(page.locator("#actions")).to_have_text("1")
                    await page.locator("#schedule-actions input[name=note]").fill("live")
                    await page.locator("#unpause").click()
                    await expect(page.locator("#state")).to_have_text("active")
                    await expect(page.locator("#next li")).to_have_count(5)
                    await _shot(page, "schedule")
                    await page.locator("#delete").click()
                    await expect(page.locator("#notice")).to_have_text(f"{sid} deleted")
                    await page.goto(f"{base}/ui/schedules/{sid}")
                    await expect(page.locator("body")).to_contain_text("deleted")
                finally:
                    await browser.close()
    finally:
        await client.close()


async def _ran(handle) -> bool:
    state = (await handle.describe()).state
    return state.actions == 1 and not state.running


@activity.defn
async def console_steps(n: int) -> int:
    for i in range(n):
        activity.publish("progress", {"step": i})
    return n


@workflow.defn
class ConsoleNarrator:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def begin(self) -> None:
        self.go = True

    @workflow.run
    async def run(self, n: int) -> int:
        workflow.publish("progress", "waiting")
        await workflow.wait_condition(lambda: self.go)
        await workflow.execute_activity(console_steps, n, start_to_close_timeout=timedelta(seconds=30))
        workflow.publish("progress", "done")
        return n


async def test_a_workflows_stream_live_in_a_browser(gateway_url, api_key, gw_config):
    tag = uuid.uuid4().hex[:6]
    wid = f"narrate-{tag}"
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue=f"narrate-{tag}", workflows=[ConsoleNarrator], activities=[console_steps]):
            handle = await client.start_workflow(ConsoleNarrator, 3, id=wid, task_queue=f"narrate-{tag}")
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
                try:
                    page = await browser.new_page(viewport={"width": 1400, "height": 900})
                    await _sign_in(page, gateway_url, api_key)
                    await page.goto(f"{gateway_url}/ui/workflows/{wid}")
                    await page.locator("#streams-link").click()
                    await page.locator("input[name=name]").fill("progress")
                    await page.locator("button:has-text('Follow')").click()
                    rows = page.locator("#stream tr")
                    await expect(rows).to_have_count(1)  # live: the value published so far
                    await expect(rows.nth(0)).to_contain_text('"waiting"')
                    await handle.signal(ConsoleNarrator.begin)
                    await expect(rows).to_have_count(5)  # the rest as they are accepted
                    await expect(rows.nth(1)).to_contain_text("activity 1 attempt 1")
                    await expect(rows.nth(3)).to_contain_text('{"step":2}')
                    await expect(rows.nth(4)).to_contain_text('"done"')
                    await expect(page.locator("#stream-state")).to_have_attribute("data-ended", "yes")
                    await _shot(page, "stream")
                finally:
                    await browser.close()
    finally:
        await client.close()


@activity.defn
async def console_ping(n: int) -> int:
    return n + 1


async def test_standalone_activities_listed_over_http_the_cli_and_in_a_browser(
    gateway_url, api_key, gw_config, gw_projection
):
    tag = uuid.uuid4().hex[:6]
    client = await Client.connect(config=gw_config)
    try:
        async with Worker(client, task_queue=f"pings-{tag}", activities=[console_ping]):
            for i in range(2):
                await client.execute_activity(
                    console_ping, i, id=f"ping-{tag}-{i}", task_queue=f"pings-{tag}",
                    start_to_close_timeout=timedelta(seconds=30),
                )  # fmt: skip
        # no worker on this queue: it stays running
        idle = await client.start_activity(
            console_ping, 9, id=f"idle-{tag}", task_queue=f"idle-{tag}", start_to_close_timeout=timedelta(seconds=30)
        )
        await client.start_workflow(ThreeSteps, 1, id=f"wf-{tag}", task_queue=f"idle-{tag}")  # not an activity
        async with checked_client(gateway_url, headers=auth(api_key)) as http:

            async def three_listed() -> bool:
                r = await http.get("/v1/activities", params={"include_counts": "true"})
                mine = [a for a in r.json()["activities"] if tag in a["activity_id"]]
                return len(mine) == 3 and any(a["status"] == "completed" for a in mine)

            await wait_until(three_listed, 60, "three standalone activities in the projection", interval=0.5)
            r = await http.get("/v1/activities", params={"type": "console_ping", "status": "running"})
            running = [a for a in r.json()["activities"] if tag in a["activity_id"]]
            assert [(a["activity_id"], a["run_id"], a["status"]) for a in running] == [
                (f"idle-{tag}", idle.run_id, "running")
            ]
            assert running[0]["search_attributes"] == {} and running[0]["task_queue"] == f"idle-{tag}"
            everything = (await http.get("/v1/activities", params={"page_size": 1000})).json()["activities"]
            assert not any(a["activity_id"].startswith("wf-") for a in everything)  # workflows are not listed
        env = {**os.environ, "KADENCE_REDIS_URL": redis_url()}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kadence.cli", "--log-level", "warning", "--bootstrap", gw_config.bootstrap,
            "--namespace", gw_config.namespace, "activity", "list", "--status", "completed", "-o", "json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        listed = sorted(a["activity_id"] for a in json.loads(out)["items"] if tag in a["activity_id"])
        assert listed == [f"ping-{tag}-0", f"ping-{tag}-1"]
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
            try:
                page = await browser.new_page(viewport={"width": 1400, "height": 900})
                await _sign_in(page, gateway_url, api_key)
                await page.goto(f"{gateway_url}/ui/activities?type=console_ping")
                await expect(page.locator("h1")).to_have_text("Standalone activities")
                await expect(page.locator(f"#activities a:has-text('idle-{tag}')")).to_have_count(1)
                await page.locator(f"#activities a:has-text('idle-{tag}')").click()
                await expect(page.locator("h1")).to_contain_text(f"kadence-activity:idle-{tag}")
                await _shot(page, "activities")
            finally:
                await browser.close()
        await idle.terminate()
    finally:
        await client.close()
