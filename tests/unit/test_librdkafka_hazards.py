"""No code calls a librdkafka API that is known to crash the process in the version we pin.

``AdminClient.list_consumer_group_offsets``: librdkafka 2.16 dereferences the admin client's
missing consumer group when the coordinator answers NOT_COORDINATOR (librdkafka #5040); a
processor's backlog reporter died with SIGSEGV in about one start in eight on a fresh broker.
Committed offsets are read with a non-subscribing consumer of the group instead
(``kadence.topics.backlog.BacklogProbe._committed``)."""

import ast

import pytest

from tests.support.tree import FOLDERS, ROOT, source_files

#: method name -> why it is banned
BANNED_CALLS = {
    "list_consumer_group_offsets": "SIGSEGV on NOT_COORDINATOR (librdkafka #5040); use Consumer(group).committed()",
}


def banned_calls(source: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in BANNED_CALLS:
            out.append((node.lineno, node.func.attr))
    return out


@pytest.mark.parametrize("folder", [*FOLDERS, "scripts", "bench"])
def test_no_code_calls_an_api_that_crashes_librdkafka(folder):
    found = []
    for path in source_files(folder):
        for line, name in banned_calls(path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{line}: {name}: {BANNED_CALLS[name]}")
    assert found == []


def test_the_scanner_finds_a_banned_call():
    assert banned_calls("futs = admin.list_consumer_group_offsets([g], request_timeout=5)\n") == [
        (1, "list_consumer_group_offsets")
    ]
    assert banned_calls("consumer.committed(tps, timeout=5)\n") == []
