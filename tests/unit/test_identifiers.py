"""One definition of a valid workflow ID, task queue and name, used by the SDK, the gateway and
the history processor; identifiers printed to logs are escaped."""

import pytest

from kadence import Client, InvalidIdentifierError, Worker
from kadence.topics.identifiers import MAX_ID_LENGTH, check_name, check_task_queue, check_workflow_id, escape, problem
from tests.unit.engine_harness import Harness


@pytest.mark.parametrize("value", ["order-1", "order-1/child-2", "ünïcode-ID ✓", "x" * MAX_ID_LENGTH])
def test_valid_workflow_ids(value):
    assert check_workflow_id(value) == value


@pytest.mark.parametrize(
    "value, why",
    [
        ("", "must not be empty"),
        ("x" * (MAX_ID_LENGTH + 1), "over the limit"),
        ("a\nb", "U+000A"),
        ("a\x00b", "U+0000"),
        ("a\u202eb", "U+202E"),  # right-to-left override: hides what a console shows
        ("a\x85b", "U+0085"),  # C1 next line
        (42, "must be a string"),
    ],
)
def test_invalid_workflow_ids_are_a_typed_error_naming_the_field(value, why):
    with pytest.raises(InvalidIdentifierError) as info:
        check_workflow_id(value, field="id")
    assert why in str(info.value) and info.value.field == "id"


def test_names_hold_no_slash_and_task_queues_only_topic_characters():
    assert check_name("approve", field="signal") == "approve"
    with pytest.raises(InvalidIdentifierError, match="'/'"):
        check_name("a/b", field="signal")
    assert check_task_queue("orders.eu-1_v2") == "orders.eu-1_v2"
    for bad in ("a/b", ".hidden", "with space", "x" * 101, ""):
        with pytest.raises(InvalidIdentifierError, match="Kafka topics"):
            check_task_queue(bad)


def test_escape_leaves_clean_text_alone_and_makes_forged_lines_one_line():
    assert escape("order-1/child-2") == "order-1/child-2"
    forged = "x\n2026-12-01 00:00:00 INFO fake line"
    assert "\n" not in escape(forged) and escape(forged).startswith("x\\u000a2026")
    assert escape("a\\u000ab") == "a\\\\u000ab"  # a literal backslash cannot fake an escape
    assert problem("ok", max_length=5, slash=False) is None


async def test_the_sdk_refuses_bad_identifiers_before_sending_anything():
    client = Client.__new__(Client)  # no broker: the checks come before any use of the engine
    client._engine = None
    with pytest.raises(InvalidIdentifierError):
        await client.start_workflow("Order", id="a\nb", task_queue="q")
    with pytest.raises(InvalidIdentifierError):
        await client.start_workflow("Order", id="ok", task_queue="bad/queue")
    with pytest.raises(InvalidIdentifierError):
        client.get_workflow_handle("a\x00b")
    with pytest.raises(InvalidIdentifierError):
        Worker(client, task_queue="no spaces")


def test_the_processor_rejects_a_start_with_a_bad_identifier_and_records_nothing():
    h = Harness()
    out = h.start("a\nforged", "Order", [], request_id="r1")
    assert [(r["status"], r["message"].split(":")[0]) for r in out.replies] == [("rejected", "invalid workflow_id")]
    assert h.events == [] and h.tasks == [] and h.store.get_state("a\nforged") is None
    out = h.start("fine", "Order", [], queue="bad/queue", request_id="r2")
    assert out.replies[0]["message"].startswith("invalid task_queue")
    assert h.events == []


def test_the_cli_log_format_keeps_a_forged_identifier_on_one_line():
    import logging

    from kadence.topics.identifiers import EscapingFormatter

    record = logging.LogRecord(
        "kadence.x",
        logging.INFO,
        __file__,
        1,
        "terminated workflow %s: %s",
        ("a\n2026-12-01 00:00:00 INFO kadence: fake", "reason\r\x00"),
        None,
    )
    line = EscapingFormatter("%(levelname)s %(message)s").format(record)
    assert "\n" not in line and "\r" not in line and "\x00" not in line
    assert line == "INFO terminated workflow a\\u000a2026-12-01 00:00:00 INFO kadence: fake: reason\\u000d\\u0000"
