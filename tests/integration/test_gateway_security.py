"""The gateway's guard on the real broker and Redis: API keys per namespace (401/403), quotas (429),
Redis outages (503), the keys CLI and the audit log, consistency tokens. Every refused request is
checked to have produced no command: the commands topic is read back."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

import pytest
import redis as sync_redis
from click.testing import CliRunner

from kadence.cli.main import main as cli
from kadence.gateway import ConsistencyToken, GatewayConfig, RateLimit, create_app
from kadence.topics import Catalogue, KafkaConfig

from .conftest import ProcessorProcs
from .gateway_support import auth, checked_client, commands_for, devstack, make_key, redis_url, serve

START = "/v1/workflows/Collector/start"


def _body(wid: str) -> dict:
    return {"workflow_id": wid, "task_queue": "q", "input": [5]}


@pytest.fixture(scope="module")
def other_ns(kafka_bootstrap, tmp_path_factory):
    """A second namespace with its own processor and one running workflow, ``exists``."""
    config = KafkaConfig(bootstrap=kafka_bootstrap, namespace=f"gb{uuid.uuid4().hex[:9]}", partitions=2)
    Catalogue(config).apply()
    procs = ProcessorProcs(config, tmp_path_factory.mktemp("processor-b"))
    procs.start()
    yield config
    procs.close()


@pytest.fixture(scope="module")
def two_ns_url(gw_config, engine, other_ns):
    app = create_app(GatewayConfig(kafka=gw_config, redis_url=redis_url(), auth_cache_seconds=0))
    with serve(app) as url:
        yield url


async def test_without_a_valid_key_every_operation_is_401_and_produces_nothing(two_ns_url, gw_config):
    wid = f"noauth-{uuid.uuid4().hex[:8]}"
    forged = "kdn_0123456789ab_" + "A" * 43
    async with checked_client(two_ns_url) as http:
        for headers in (
            {},
            {"Authorization": "Basic dXNlcjpwdw=="},
            {"Authorization": "Bearer nope"},
            {"Authorization": f"Bearer {forged}"},
        ):
            for method, path, body in (
                ("POST", START, _body(wid)),
                ("GET", f"/v1/workflows/{wid}", None),
                ("POST", f"/v1/workflows/{wid}/terminate", {}),
                ("POST", f"/v1/workflows/{wid}/signals", {"signal": "add"}),
            ):
                resp = await http.request(method, path, json=body, headers=headers)
                assert resp.status_code == 401, (headers, path, resp.text)
                assert resp.json()["error"]["code"] == "unauthenticated"
                assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        # health, readiness, metrics and the document need no key
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/openapi.json")).status_code == 200
    assert commands_for(gw_config, wid) == []


async def test_a_key_of_one_namespace_gets_403_in_another_and_cannot_tell_what_exists(two_ns_url, gw_config, other_ns):
    key_a, key_b = make_key(gw_config.namespace), make_key(other_ns.namespace)
    wid = f"b-only-{uuid.uuid4().hex[:8]}"
    async with checked_client(two_ns_url) as http:
        started = await http.post(START, json=_body(wid), headers=auth(key_b))
        assert started.status_code == 201, started.text
        as_a_in_b = {**auth(key_a), "Kadence-Namespace": other_ns.namespace}
        answers = {}
        for target in (wid, f"never-{uuid.uuid4().hex[:8]}"):
            for method, path, body in (
                ("GET", f"/v1/workflows/{target}", None),
                ("GET", f"/v1/workflows/{target}/history", None),
                ("POST", f"/v1/workflows/{target}/signals", {"signal": "add", "input": ["x"]}),
                ("POST", f"/v1/workflows/{target}/cancel", {}),
                ("POST", f"/v1/workflows/{target}/terminate", {}),
                ("POST", f"/v1/workflows/{target}/queries/count", {}),
                ("POST", START, _body(target)),
            ):
                resp = await http.request(method, path, json=body, headers=as_a_in_b)
                assert resp.status_code == 403, (path, resp.text)
                answers.setdefault((method, path.replace(target, "*")), set()).add(resp.text)
        # the same answer whether the workflow exists or not
        assert all(len(texts) == 1 for texts in answers.values()), answers
        # in its own namespace, key A does not see B's workflow at all
        assert (await http.get(f"/v1/workflows/{wid}", headers=auth(key_a))).status_code == 404
        # B's workflow was not touched: still running, only its start in the commands topic
        described = await http.get(f"/v1/workflows/{wid}", headers=auth(key_b))
        assert described.status_code == 200 and described.json()["status"] == "running"
    # B: the start and key B's describe; A: key A's own describe (reads are commands too)
    assert commands_for(other_ns, wid) == ["StartWorkflow", "AwaitWorkflowResult"]
    assert commands_for(gw_config, wid) == ["AwaitWorkflowResult"]


async def test_over_quota_is_429_with_retry_after_and_starts_nothing(two_ns_url, gw_config):
    slow = make_key(gw_config.namespace, rate=0.01, burst=2)  # its own bucket: 2 requests, then 1 per 100 s
    ok = make_key(gw_config.namespace)
    ids = [f"quota-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    async with checked_client(two_ns_url) as http:
        first = [await http.post(START, json=_body(w), headers=auth(slow)) for w in ids[:2]]
        assert [r.status_code for r in first] == [201, 201], [r.text for r in first]
        over = await http.post(START, json=_body(ids[2]), headers=auth(slow))
        assert over.status_code == 429, over.text
        assert over.json()["error"]["code"] == "rate_limited" and int(over.headers["Retry-After"]) >= 1
        # another key of the namespace has its own bucket and sees that nothing was started
        assert (await http.get(f"/v1/workflows/{ids[2]}", headers=auth(ok))).status_code == 404
    assert commands_for(gw_config, ids[2]) == ["AwaitWorkflowResult"]  # the other key's describe only


async def test_the_namespace_quota_is_shared_by_its_keys_and_by_gateway_instances(gw_config, engine):
    prefix = f"kadence:gw-q{uuid.uuid4().hex[:6]}:"  # buckets of their own, not the module's
    config = GatewayConfig(
        kafka=gw_config, redis_url=redis_url(), redis_prefix=prefix, namespace_limit=RateLimit(0.01, 3)
    )
    keys = [make_key(gw_config.namespace, prefix=prefix) for _ in range(2)]
    with serve(create_app(config)) as one, serve(create_app(config)) as two:
        async with checked_client(one) as a, checked_client(two) as b:
            statuses = [
                (await a.get("/v1/workflows/nobody", headers=auth(keys[0]))).status_code,
                (await b.get("/v1/workflows/nobody", headers=auth(keys[1]))).status_code,
                (await a.get("/v1/workflows/nobody", headers=auth(keys[1]))).status_code,
            ]
            assert statuses == [404, 404, 404]
            wid = f"nsq-{uuid.uuid4().hex[:8]}"
            refused = await b.post(START, json=_body(wid), headers=auth(keys[0]))
            assert refused.status_code == 429 and refused.headers["Retry-After"].isdigit(), refused.text
    assert commands_for(gw_config, wid) == []


def _stop_keeping_data(server) -> None:
    """Stop the Redis server with a final save, so that it comes back with its keys."""
    sync_redis.Redis.from_url(server.url).shutdown(save=True)
    server.proc.wait(30)
    server.stop()


async def _revoke(url: str, key: str) -> None:
    import redis.asyncio as aioredis

    from kadence.gateway import ApiKeyStore
    from kadence.gateway.keys import parse_key

    client = aioredis.from_url(url)
    try:
        assert await ApiKeyStore(client, "kadence:gw:").revoke(parse_key(key)[0]) is not None
    finally:
        await client.aclose()


@pytest.mark.parametrize("outage", ["stopped", "hung"])
async def test_with_redis_down_every_mutation_is_503_and_applies_nothing(gw_config, engine, tmp_path, outage):
    """Starts, signals, cancels and terminates, with and without Idempotency-Key, by a key verified
    just before, by a key revoked before the outage and by a key verified long ago: all 503, no
    command produced; reads only by a key verified within auth_cache_seconds; all back after."""
    import signal as signals

    (tmp_path / "redis").mkdir()
    server = devstack().RedisServer(workdir=tmp_path / "redis", die_with_parent=True)
    server.start()
    try:
        key, revoked, never_used = (make_key(gw_config.namespace, url=server.url) for _ in range(3))
        app = create_app(
            GatewayConfig(kafka=gw_config, redis_url=server.url, auth_cache_seconds=300, retry_after_seconds=3)
        )
        with serve(app) as url:
            async with checked_client(url, allowed_5xx=(503,)) as http:
                before = f"redis-up-{uuid.uuid4().hex[:8]}"
                assert (await http.post(START, json=_body(before), headers=auth(key))).status_code == 201
                # the revoked key was verified (and cached) by this instance before it was revoked
                assert (await http.get(f"/v1/workflows/{before}", headers=auth(revoked))).status_code == 200
                await _revoke(server.url, revoked)

                if outage == "stopped":
                    _stop_keeping_data(server)
                else:
                    server.proc.send_signal(signals.SIGSTOP)
                down = f"redis-down-{uuid.uuid4().hex[:8]}"
                t0 = time.monotonic()
                mutations = (
                    ("POST", START, _body(down)),
                    ("POST", f"/v1/workflows/{before}/signals", {"signal": "add", "input": [1]}),
                    (
                        "POST",
                        f"/v1/workflows/{before}/signals",
                        {"signal": "add", "workflow_type": "Collector", "task_queue": "q"},
                    ),
                    ("POST", f"/v1/workflows/{before}/cancel", {}),
                    ("POST", f"/v1/workflows/{before}/terminate", {}),
                )
                for who in (key, revoked):
                    for idem in ({"Idempotency-Key": f"k-down-{uuid.uuid4().hex[:6]}"}, {}):
                        for method, path, body in mutations:
                            resp = await http.request(method, path, json=body, headers={**auth(who), **idem})
                            assert resp.status_code == 503, (path, idem, resp.text)
                            assert resp.json()["error"]["code"] == "unavailable" and resp.headers["Retry-After"] == "3"
                # one request waits out the Redis client's 2 s timeout; the rest fail fast meanwhile
                # (gateway.redis_breaker); before it, each waited 2 s and this loop took ~45 s hung
                assert time.monotonic() - t0 < 15, "a Redis outage must be answered promptly"
                # a read by the key verified just before goes on (decision 0015); a read by a key
                # this instance never verified does not
                read = await http.get(f"/v1/workflows/{before}", headers=auth(key))
                assert read.status_code == 200 and read.json()["status"] == "running"
                unverified = await http.get(f"/v1/workflows/{before}", headers=auth(never_used))
                assert unverified.status_code == 503, unverified.text
                ready = await http.get("/readyz")
                assert ready.status_code == 503 and ready.json()["checks"]["redis"].startswith("unavailable")

                if outage == "stopped":
                    server.start()
                else:
                    server.proc.send_signal(signals.SIGCONT)
                # ready again once a probe after the fail-fast time got Redis's answer
                deadline = time.monotonic() + 20
                while (await http.get("/readyz")).status_code != 200:
                    assert time.monotonic() < deadline, "the gateway did not see Redis come back"
                    await asyncio.sleep(0.25)
                again = await http.post(START, json=_body(down), headers={**auth(key), "Idempotency-Key": "k-back"})
                assert again.status_code == 201, again.text
                gone = await http.post(
                    f"/v1/workflows/{before}/signals", json={"signal": "add", "input": [2]}, headers=auth(revoked)
                )
                assert gone.status_code == 401, "a key revoked before the outage works again"
                assert (await http.get("/readyz")).status_code == 200
    finally:
        if outage == "hung" and server.proc is not None and server.proc.poll() is None:
            server.proc.send_signal(signals.SIGCONT)
        server.cleanup()
    assert commands_for(gw_config, down) == ["StartWorkflow"], "a refused start produced a command"
    # describes (AwaitWorkflowResult without waiting) are the reads; no signal, cancel or terminate went
    assert [c for c in commands_for(gw_config, before) if c != "AwaitWorkflowResult"] == ["StartWorkflow"], (
        "a refused mutation ran"
    )


async def test_with_redis_down_a_read_by_a_key_verified_long_ago_is_503(gw_config, engine, tmp_path):
    (tmp_path / "redis").mkdir()
    server = devstack().RedisServer(workdir=tmp_path / "redis", die_with_parent=True)
    server.start()
    try:
        key = make_key(gw_config.namespace, url=server.url)
        app = create_app(
            GatewayConfig(kafka=gw_config, redis_url=server.url, auth_cache_seconds=1, retry_after_seconds=3)
        )
        with serve(app) as url:
            async with checked_client(url, allowed_5xx=(503,), headers=auth(key)) as http:
                wid = f"redis-old-{uuid.uuid4().hex[:8]}"
                assert (await http.post(START, json=_body(wid))).status_code == 201
                assert (await http.get(f"/v1/workflows/{wid}")).status_code == 200
                _stop_keeping_data(server)
                await asyncio.sleep(1.5)  # the key's verification is now older than auth_cache_seconds
                stale = await http.get(f"/v1/workflows/{wid}")
                assert stale.status_code == 503, stale.text
    finally:
        server.cleanup()


async def test_keys_cli_creates_lists_revokes_and_audits(two_ns_url, gw_config, caplog):
    caplog.set_level(logging.INFO)
    runner = CliRunner()
    env = {"KADENCE_REDIS_URL": redis_url()}

    async def kadence(*args):  # the CLI runs its own event loop: give it a thread
        return await asyncio.to_thread(runner.invoke, cli, list(args), env=env)

    created = await kadence("keys", "create", "--namespace", gw_config.namespace, "--name", "ci", "--json")
    assert created.exit_code == 0, created.output
    made = json.loads(created.output)
    key, key_id = made["key"], made["key_id"]
    assert key.startswith(f"kdn_{key_id}_") and made["namespace"] == gw_config.namespace

    listed = await kadence("keys", "list", "--namespace", gw_config.namespace)
    assert listed.exit_code == 0 and key_id in listed.output and "ci" in listed.output
    assert key not in listed.output, "keys list must never show a key"

    wid = f"cli-key-{uuid.uuid4().hex[:8]}"
    async with checked_client(two_ns_url, headers=auth(key)) as http:
        assert (await http.post(START, json=_body(wid))).status_code == 201
        term = await http.post(f"/v1/workflows/{wid}/terminate", json={"reason": "ops"})
        assert term.status_code == 200, term.text
        revoked = await kadence("keys", "revoke", key_id)
        assert revoked.exit_code == 0, revoked.output
        refused = await http.get(f"/v1/workflows/{wid}")  # this gateway caches keys for 0 s
        assert refused.status_code == 401
    assert (await kadence("keys", "revoke", key_id)).exit_code == 1

    audit = [r.getMessage() for r in caplog.records if r.name == "kadence.audit"]
    assert any("created" in m and key_id in m for m in audit), audit
    assert any("revoked" in m and key_id in m for m in audit), audit
    assert any("terminate" in m and wid in m and key_id in m for m in audit), audit
    secret = key.removeprefix(f"kdn_{key_id}_")  # the whole secret: it may itself hold "_"
    assert len(secret) == 43
    assert not any(secret in r.getMessage() for r in caplog.records), "a key reached the logs"


async def test_mutations_return_a_consistency_token_that_reads_accept_and_check(gw_config, engine):
    seen: list = []

    async def read_your_writes(namespace, token):
        seen.append((namespace, token))

    key = make_key(gw_config.namespace)
    app = create_app(GatewayConfig(kafka=gw_config, redis_url=redis_url(), read_your_writes=read_your_writes))
    wid = f"token-{uuid.uuid4().hex[:8]}"
    with serve(app) as url:
        async with checked_client(url, headers=auth(key)) as http:
            started = await http.post(START, json=_body(wid), headers={"Idempotency-Key": f"t-{wid}"})
            assert started.status_code == 201, started.text
            token = ConsistencyToken.decode(started.headers["Kadence-Consistency-Token"])
            assert (token.namespace, token.workflow_id, token.run_id) == (
                gw_config.namespace,
                wid,
                started.json()["run_id"],
            )
            assert token.history_seq >= 1
            text = started.headers["Kadence-Consistency-Token"]
            signaled = await http.post(f"/v1/workflows/{wid}/signals", json={"signal": "add", "input": ["x"]})
            assert (
                ConsistencyToken.decode(signaled.headers["Kadence-Consistency-Token"]).history_seq > token.history_seq
            )

            by_query = await http.get(f"/v1/workflows/{wid}", params={"consistency_token": text})
            by_header = await http.get(f"/v1/workflows/{wid}/history", headers={"Kadence-Consistency-Token": text})
            assert by_query.status_code == 200 and by_header.status_code == 200
            assert seen == [(gw_config.namespace, token)] * 2

            for bad in (
                "garbage",
                "",
                ConsistencyToken(gw_config.namespace, "another", "r", 1).encode(),
                ConsistencyToken("elsewhere", wid, "r", 1).encode(),
            ):
                resp = await http.get(f"/v1/workflows/{wid}", params={"consistency_token": bad})
                assert resp.status_code == 400, (bad, resp.text)
                assert resp.json()["error"]["field"] == "consistency_token"
            assert len(seen) == 2, "an invalid token must not reach the read-your-writes hook"
            # a retry gets the same body; the token may move on, which is why it is a header
            retry = await http.post(START, json=_body(wid), headers={"Idempotency-Key": f"t-{wid}"})
            assert (retry.status_code, retry.content) == (201, started.content)
