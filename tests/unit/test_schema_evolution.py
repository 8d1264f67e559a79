"""Schema evolution: every record ever written still decodes with today's schemas.

Each frozen schema set (``schemas/versions/<N>.json``, its schemas in ``schemas/store/``) is a
released wire format. For every record
type of every frozen version we build representative records that take every union branch (each
Command body, each HistoryEvent attribute type, each workflow command, optional fields set and
unset), write them with version N's schemas and the ``b"K" + bytes([N])`` prefix, and read them
back with ``kadence.topics.serde.decode`` (today's reader). Fields must survive.

The checker itself is tested: readers that break Avro resolution (a field added without a default,
a changed type, a removed union branch, a renamed field) must be reported.
"""

from __future__ import annotations

import copy
import hashlib
import io
import itertools
import json
from pathlib import Path

import fastavro
import pytest

import kadence.schemas
from kadence.schemas import CURRENT_VERSION, available_versions, load_schema_set
from kadence.topics import serde
from kadence.topics.errors import SchemaError
from tests.support.avro_samples import Samples, typed_search_attribute
from tests.support.fastavro_reference import parse_set, short_names, write

SCHEMA_DIR = Path(kadence.schemas.__file__).resolve().parent

#: sha256 of each released (frozen) schema set. A frozen set is a wire format that records on
#: Kafka were written with: it must never change. When you freeze a new version N, add its digest
#: here (the failure message prints it).
FROZEN_DIGESTS = {
    1: "7f1ca8ed8b74d40593bf0d29d416eaa5a3ae19a0b8c54d6ab75ef198560860c5",
    2: "4e51bdfdcd58cc06bf241cb716fc21f5bb1f0421c2af68c8bea07bda5751c873",
    3: "276c70cb27e56df30eae2eec3112c2915018c462f701983a97387cfb01762cfd",
    4: "026b80ebf19d2729d90587a1ea21215aab282739035ebba72c91a3318421645a",
    5: "feef42e4d6f1be34fe019079586185708e61303eee421ca46745e6c0b88f9bde",
    6: "49b7d7bfae2c71c507912119a0a66ea5303bbd1c3887537523a4d9d896412acf",
    7: "85b72bdfc05ac713bce5a9aee109237956039f7d7e1de56518e68375f32b81f5",
    8: "9fa0e316aa2d0cfecd8600f2b1b340d1d2628b9a7acfb66aecdb2c13dad2e338",
    9: "2da0a1ccfc79306e0b0a710c7a0bc7a3762adc5ceb287eaea523d49c6967090f",
    10: "b33e5db7aa1d97c94adc841f519463ef0283836255ef29e83dc7ac301aff1e10",
    11: "5a71efc6588de83a2cf17a73cad43af692b887d7bc90ab64c5288a14eff72380",
    12: "db854a1a525791725d4a5cbdd14513e1f1adef06376be580ab86cd17bb239008",
    13: "89543af007bd3b5e65fb1acf70faf3170d999c87e8da48ca0bb9d2069a0bdc20",
    14: "7700509c140bbbfd1a6784fe5eab123e72429f683ecea0c5a7f5924a899b3bf8",
    15: "46b6178a878bc9b9e3a36b16c0652fa5a134719b17a1673a721f18db37ac7b2f",
    16: "0635c82635fc8e3c532e7090b35081e2f9b2e9d9d4ac45c2e1fb0193c12b150e",
    17: "a36084c01470f2c01b15a0398f0265311b27879f05a5a9f134469d8a9761ffd5",
    18: "22fd29cede494d2b3de3f99ad3487929c05a894fbc381fa189dd098940c2b725",
    19: "f4e16d84c126ca9e1de90bd2e845ee9c30ef26611dcdf1c392663fc32cb6155d",
    20: "8da81109d9d4e716d095fc5cf5fcbd2dfed6955645be4f620f632f17599e07f5",
    21: "9dee4f2e49649e568d6d14f6aef12e2c9b45870594d85a738810f61cf493b61d",
    22: "1a9b94151b019b58a6f40753ce52c13c0f2a1241dbeddbe79f852c124d40dd68",
}


#: fields removed on purpose, which old records carry and today's reader drops: the envelopes'
#: ``schema_version`` (removed in version 12; it repeated the two-byte prefix, issue 20)
RETIRED_FIELDS = frozenset({"schema_version"})


def survival_problems(written, read, path: str, ignore: frozenset | set = frozenset()) -> list[str]:
    """What the reader lost or changed of a written value (reader-only fields are defaults);
    fields named in ``ignore`` are not compared."""
    if isinstance(written, tuple):
        if not isinstance(read, tuple) or read[0] != written[0]:
            return [f"{path}: union branch {written[0]} read back as {read!r:.80}"]
        return survival_problems(written[1], read[1], f"{path}<{written[0]}>", ignore)
    if isinstance(written, dict):
        if not isinstance(read, dict):
            return [f"{path}: record read back as {read!r:.80}"]
        out = []
        for key, value in written.items():
            if key in ignore:
                continue
            if key not in read:  # a field that old records carry and today's reader no longer reads
                out.append(f"{path}.{key}: written by the old version, dropped by today's reader")
                continue
            out += survival_problems(value, read[key], f"{path}.{key}", ignore)
        return out
    if isinstance(written, list):
        if not isinstance(read, list) or len(read) != len(written):
            return [f"{path}: list of {len(written)} read back as {read!r:.80}"]
        return [
            p
            for i, (w, r) in enumerate(zip(written, read, strict=False))
            for p in survival_problems(w, r, f"{path}[{i}]", ignore)
        ]
    if not _same(written, read):
        return [f"{path}: wrote {written!r:.60}, read {read!r:.60}"]
    return []


def _same(written, read) -> bool:
    """Equal, allowing Avro's promotions (int -> long/float/double, string <-> bytes)."""
    if isinstance(written, bool) or isinstance(read, bool):
        return type(written) is type(read) and written == read
    if isinstance(written, (int, float)) and isinstance(read, (int, float)):
        return written == read and not (isinstance(written, float) and isinstance(read, int))
    if isinstance(written, str) and isinstance(read, bytes):
        return written.encode() == read
    if isinstance(written, bytes) and isinstance(read, str):
        return written == read.encode()
    return type(written) is type(read) and written == read


def compatibility_problems(writer_set: list[dict], reader_set: list[dict]) -> list[str]:
    """Every way in which records written with ``writer_set`` fail to resolve with ``reader_set``."""
    writers, readers = parse_set(writer_set), parse_set(reader_set)
    samples = Samples(writer_set, version=0)
    problems = []
    for schema in writer_set:
        name = schema["name"]
        if name not in readers:
            problems.append(f"{name}: record type removed from the current schemas")
            continue
        for i, value in enumerate(samples.variants(schema, name)):
            data = write(writers, name, value)
            try:
                read = fastavro.schemaless_reader(
                    io.BytesIO(data),
                    writers[name],
                    readers[name],
                    return_record_name=True,
                    return_record_name_override=True,
                )
            except Exception as exc:  # noqa: BLE001 - any failure to resolve is the finding
                problems.append(f"{name} sample {i}: {type(exc).__name__}: {exc}")
                continue
            problems += survival_problems(value, short_names(read), f"{name}[{i}]", RETIRED_FIELDS)
    return problems


def set_digest(version: int) -> str:
    h = hashlib.sha256()
    for schema in load_schema_set(version):
        h.update(json.dumps(schema, sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def record_names(schema_set: list[dict]) -> list[str]:
    return [s["name"] for s in schema_set]


# ---------------------------------------------------------------- the sample builder covers the unions


def test_samples_cover_every_command_body_and_every_event_attribute_type():
    current = load_schema_set()
    samples = Samples(current)
    by_name = {s["name"]: s for s in current}
    bodies = {v["body"][0] for v in samples.variants(by_name["Command"], "Command")}
    assert bodies == set(next(f["type"] for f in by_name["Command"]["fields"] if f["name"] == "body"))
    attributes = {v["attributes"][0] for v in samples.variants(by_name["HistoryEvent"], "HistoryEvent")}
    assert attributes == set(next(f["type"] for f in by_name["HistoryEvent"]["fields"] if f["name"] == "attributes"))
    [task] = samples.variants(by_name["WorkflowTask"], "WorkflowTask")[:1]
    assert {e["attributes"][0] for e in task["events"]} == attributes
    [completed] = [
        v["body"][1]
        for v in samples.variants(by_name["Command"], "Command")
        if v["body"][0] == "RespondWorkflowTaskCompleted"
    ][:1]
    commands = next(
        f["type"]["items"] for f in by_name["RespondWorkflowTaskCompleted"]["fields"] if f["name"] == "commands"
    )
    assert (
        {c[0] for c in completed["commands"]}
        == set(commands)
        >= {"ScheduleActivityTask", "CompleteWorkflowExecution", "FailWorkflowExecution"}
    )


# ---------------------------------------------------------------- old versions decode today


@pytest.mark.parametrize("version", available_versions())
def test_frozen_version_resolves_against_current_schemas(version):
    problems = compatibility_problems(load_schema_set(version), load_schema_set())
    assert problems == [], (
        f"records written with schemas/versions/{version} no longer resolve with the current schemas "
        "(add fields only with a default, never change a field's type, add union branches only at the "
        "end):\n  " + "\n  ".join(problems[:20])
    )


@pytest.mark.parametrize("version", available_versions())
def test_frozen_version_records_decode_through_serde(version):
    frozen = load_schema_set(version)
    writers = parse_set(frozen)
    samples = Samples(frozen, version)
    decoded = 0
    for schema in frozen:
        name = schema["name"]
        for i, value in enumerate(samples.variants(schema, name)):
            data = write(writers, name, value, version)
            assert data[:2] == b"K" + bytes([version])
            read = serde.decode(name, data)
            problems = survival_problems(value, read, f"{name}[{i}]", RETIRED_FIELDS)
            assert problems == [], f"v{version} {name} sample {i} lost data: {problems}"
            # what was read can be written again (the processor rewrites state it restored):
            # fields only today's reader has must come back as values of their own type
            try:
                again = serde.decode(name, serde.encode(name, read))
            except SchemaError as exc:
                pytest.fail(f"v{version} {name} sample {i} decodes but cannot be written back: {exc}")
            assert survival_problems(read, again, f"{name}[{i}]") == []
            decoded += 1
    assert decoded > len(frozen)  # unions produced more than one sample per record


def test_current_serde_writes_the_current_version_and_reads_it_back():
    samples = Samples(load_schema_set())
    for schema in load_schema_set():
        for value in samples.variants(schema, schema["name"])[:3]:
            data = serde.encode(schema["name"], value)
            assert data[:2] == bytes((serde.MAGIC, CURRENT_VERSION))
            assert survival_problems(value, serde.decode(schema["name"], data), schema["name"]) == []


@pytest.mark.parametrize(
    ("older", "newer"), [(a, b) for a in available_versions() for b in available_versions() if a < b]
)
def test_every_version_resolves_against_every_newer_one(older, newer):
    """Backward, across all versions: a reader of any later version reads what any earlier one
    wrote (a processor restoring years of records after several upgrades)."""
    problems = compatibility_problems(load_schema_set(older), load_schema_set(newer))
    assert problems == [], f"v{older} records no longer resolve with v{newer}'s schemas: {problems[:5]}"


def _branch_names(value) -> set[str]:
    """The record names a sample's unions take (``(name, record)`` tuples, nested)."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return {value[0]} | _branch_names(value[1])
    if isinstance(value, dict):
        return set().union(*(_branch_names(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_branch_names(v) for v in value))
    return set()


@pytest.mark.parametrize("newer", available_versions()[1:])
def test_the_previous_version_reads_every_newer_record_that_carries_nothing_new(newer):
    """Forward, between neighbours (a rolling upgrade has both releases running): the older
    release reads every record the newer one writes, except a record of a type, or taking a union
    branch, that the older schemas do not have (a new command or event): new fields are ignored,
    never fatal. Those exceptions are what a rolling upgrade must not write until every instance
    is upgraded."""
    older = newer - 1
    writer_set, reader_set = load_schema_set(newer), load_schema_set(older)
    writers, readers = parse_set(writer_set), parse_set(reader_set)
    known = set(readers)
    failures, read = [], 0
    for schema in writer_set:
        name = schema["name"]
        if name not in known:
            continue  # a new record type: an older release never reads it
        for i, value in enumerate(Samples(writer_set, version=0).variants(schema, name)):
            if _branch_names(value) - known or (newer >= 13 and typed_search_attribute(value)):
                continue
            try:
                fastavro.schemaless_reader(io.BytesIO(write(writers, name, value)), writers[name], readers[name])
                read += 1
            except Exception as exc:  # noqa: BLE001 - any failure to resolve is the finding
                failures.append(f"{name}[{i}]: {type(exc).__name__}: {exc}")
    assert failures == [], f"v{older} cannot read v{newer} records that carry nothing new: {failures[:5]}"
    assert read > len(known) / 2


# ---------------------------------------------------------------- frozen sets and the current files


def _avsc_files(directory: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("*.avsc"))}


def test_current_schemas_equal_the_highest_frozen_version():
    versions = available_versions()
    assert versions, "schemas/versions/ holds no frozen schema set"
    assert versions == list(range(1, versions[-1] + 1)), f"frozen versions must be 1..N without gaps: {versions}"
    latest = versions[-1]
    assert CURRENT_VERSION == latest, (
        f"kadence.schemas.CURRENT_VERSION is {CURRENT_VERSION} but the highest frozen set is "
        f"schemas/versions/{latest}.json: they must be equal"
    )
    current = _avsc_files(SCHEMA_DIR)
    frozen = {s["name"]: s for s in load_schema_set(latest)}
    changed = sorted(n for n in current.keys() & frozen.keys() if current[n] != frozen[n])
    added, removed = sorted(current.keys() - frozen.keys()), sorted(frozen.keys() - current.keys())
    order_now = (SCHEMA_DIR / "ORDER").read_text().split()
    order_frozen = kadence.schemas.manifest(latest)["order"]
    assert not (changed or added or removed or order_now != order_frozen), (
        f"the current schemas differ from the frozen set schemas/versions/{latest}.json "
        f"(changed: {changed}, added: {added}, removed: {removed}, ORDER changed: {order_now != order_frozen}). "
        f"Records already on Kafka were written with version {latest}, so a schema change is a new "
        f"version: set CURRENT_VERSION = {latest + 1} in schemas/__init__.py, run "
        f"`python -m kadence.schemas freeze`, and add the new digest to FROZEN_DIGESTS in {Path(__file__).name}. "
        "Never edit a frozen version."
    )


def test_order_lists_every_current_schema_file_exactly_once():
    order = (SCHEMA_DIR / "ORDER").read_text().split()
    files = sorted(p.stem for p in SCHEMA_DIR.glob("*.avsc"))
    assert len(order) == len(set(order)), "schemas/ORDER lists a schema twice"
    assert sorted(order) == files, (
        f"schemas/ORDER and the .avsc files disagree: only in ORDER {sorted(set(order) - set(files))}, "
        f"not in ORDER (never loaded!) {sorted(set(files) - set(order))}"
    )
    for name, schema in _avsc_files(SCHEMA_DIR).items():
        assert schema["name"] == name and schema.get("namespace") == "kadence", f"schemas/{name}.avsc"


@pytest.mark.parametrize("version", available_versions())
def test_a_manifest_names_each_record_once_with_its_own_schema(version):
    frozen = kadence.schemas.manifest(version)
    assert frozen["version"] == version
    assert len(frozen["order"]) == len(set(frozen["order"])) and sorted(frozen["order"]) == sorted(frozen["schemas"])
    for schema in load_schema_set(version):  # each checked against its digest as it loads
        assert schema.get("namespace") == "kadence" and frozen["schemas"][
            schema["name"]
        ] == kadence.schemas.schema_digest(schema)


def test_the_store_holds_each_distinct_schema_once_and_only_what_a_version_names():
    stored = {p.stem: json.loads(p.read_text()) for p in (SCHEMA_DIR / "store").glob("*.avsc")}
    named = {d for v in available_versions() for d in kadence.schemas.manifest(v)["schemas"].values()}
    assert set(stored) == named, f"unreferenced: {sorted(set(stored) - named)}, missing: {sorted(named - set(stored))}"
    for digest, schema in stored.items():
        assert kadence.schemas.schema_digest(schema) == digest, f"schemas/store/{digest}.avsc was edited"
    canonical = [json.dumps(s, sort_keys=True) for s in stored.values()]
    assert len(canonical) == len(set(canonical))
    # the store is what the versions share: far fewer files than records over all versions
    assert len(stored) < sum(len(kadence.schemas.manifest(v)["order"]) for v in available_versions()) / 3


def test_freeze_writes_a_manifest_and_only_the_new_schemas(tmp_path):
    base = tmp_path / "schemas"
    (base / "store").mkdir(parents=True)
    (base / "versions").mkdir()
    for name in (SCHEMA_DIR / "ORDER").read_text().split():
        (base / f"{name}.avsc").write_text((SCHEMA_DIR / f"{name}.avsc").read_text())
    (base / "ORDER").write_text((SCHEMA_DIR / "ORDER").read_text())
    kadence.schemas.freeze(1, base)
    first = sorted(p.name for p in (base / "store").iterdir())
    with pytest.raises(FileExistsError):
        kadence.schemas.freeze(1, base)
    task = json.loads((base / "ActivityTask.avsc").read_text())
    task["doc"] = "changed"
    (base / "ActivityTask.avsc").write_text(json.dumps(task))
    kadence.schemas.freeze(2, base)
    second = sorted(p.name for p in (base / "store").iterdir())
    assert len(second) == len(first) + 1  # only the changed schema is stored again
    one, two = (json.loads((base / "versions" / f"{v}.json").read_text()) for v in (1, 2))
    assert {n for n in one["schemas"] if one["schemas"][n] != two["schemas"][n]} == {"ActivityTask"}


@pytest.mark.parametrize("version", available_versions())
def test_frozen_versions_never_change(version):
    digest = set_digest(version)
    assert version in FROZEN_DIGESTS, (
        f'schemas/versions/{version} is new: add {version}: "{digest}" to FROZEN_DIGESTS in {Path(__file__).name}'
    )
    assert digest == FROZEN_DIGESTS[version], (
        f"schemas/versions/{version} changed after it was frozen (digest {digest}); records on Kafka were "
        "written with it. Restore it and put the change in a new version instead."
    )


def union_order_problems(older: list[dict], newer: list[dict]) -> list[str]:
    """Union branches may only be appended: the older branches must be a prefix of the newer."""

    def unions(schema_set):
        out = {}
        for schema in schema_set:
            for f in schema["fields"]:
                t = f["type"]
                if isinstance(t, dict) and t.get("type") == "array":
                    t = t["items"]
                if isinstance(t, list):
                    out[f"{schema['name']}.{f['name']}"] = [b if isinstance(b, str) else json.dumps(b) for b in t]
        return out

    old, new = unions(older), unions(newer)
    return [f"{k}: {old[k]} -> {new[k]}" for k in sorted(old.keys() & new.keys()) if new[k][: len(old[k])] != old[k]]


def test_union_branches_are_only_appended_between_versions():
    versions = available_versions()
    sets = [load_schema_set(v) for v in versions] + [load_schema_set()]
    problems = [p for a, b in itertools.pairwise(sets) for p in union_order_problems(a, b)]
    assert problems == [], "union branches reordered or removed (append new branches at the end): " + "; ".join(
        problems
    )


def test_union_order_check_flags_a_reordered_union():
    def swap(s):
        body = _field(s["Command"], "body")["type"]
        body[0], body[1] = body[1], body[0]

    problems = union_order_problems(load_schema_set(), _mutated(swap))
    assert len(problems) == 1 and problems[0].startswith("Command.body: "), problems
    removed = _mutated(lambda s: _field(s["HistoryEvent"], "attributes")["type"].pop())
    assert [p.split(":")[0] for p in union_order_problems(load_schema_set(), removed)] == ["HistoryEvent.attributes"]
    appended = _mutated(lambda s: _field(s["Command"], "body")["type"].append("TimerRecord"))
    assert union_order_problems(load_schema_set(), appended) == []


# ---------------------------------------------------------------- the check can fail


def _mutated(mutate) -> list[dict]:
    schemas = copy.deepcopy(load_schema_set())
    by_name = {s["name"]: s for s in schemas}
    mutate(by_name)
    return schemas


def _field(schema: dict, name: str) -> dict:
    return next(f for f in schema["fields"] if f["name"] == name)


INCOMPATIBLE = {
    "field added without a default": (
        lambda s: s["StartWorkflow"]["fields"].append({"name": "zz_evolution_probe", "type": "int"}),
        "StartWorkflow",
    ),
    "field type changed": (lambda s: _field(s["Failure"], "message").__setitem__("type", "long"), "Failure"),
    "union branch removed": (
        lambda s: _field(s["Command"], "body")["type"].remove("AwaitWorkflowResult"),
        "AwaitWorkflowResult",
    ),
    "field renamed without alias": (
        lambda s: _field(s["HistoryEvent"], "seq").__setitem__("name", "sequence"),
        "HistoryEvent",
    ),
    "record type removed": (lambda s: s["TimerRecord"].__setitem__("name", "DelayRecord"), "TimerRecord"),
}


@pytest.mark.parametrize("change", sorted(INCOMPATIBLE))
def test_incompatible_reader_is_rejected(change):
    mutate, culprit = INCOMPATIBLE[change]
    problems = compatibility_problems(load_schema_set(CURRENT_VERSION), _mutated(mutate))
    assert problems, f"{change}: the compatibility check accepted an incompatible reader"
    assert any(culprit in p for p in problems), problems[:5]


def test_field_added_with_a_default_is_compatible_and_reads_the_default():
    reader = _mutated(
        lambda s: s["StartWorkflow"]["fields"].append({"name": "zz_evolution_probe", "type": "int", "default": 7})
    )
    assert compatibility_problems(load_schema_set(CURRENT_VERSION), reader) == []
    writers, readers = parse_set(load_schema_set(CURRENT_VERSION)), parse_set(reader)
    value = {"workflow_type": "W", "task_queue": "q", "input": b"[]"}
    out = fastavro.schemaless_reader(
        io.BytesIO(write(writers, "StartWorkflow", value)), writers["StartWorkflow"], readers["StartWorkflow"]
    )
    assert out["zz_evolution_probe"] == 7 and out["workflow_type"] == "W"


def test_survival_check_reports_lost_and_changed_values():
    assert survival_problems({"a": 1, "b": ("X", {"c": "d"})}, {"a": 1, "b": ("X", {"c": "d"}), "new": 0}, "R") == []
    assert survival_problems({"a": 1}, {"a": 2}, "R") == ["R.a: wrote 1, read 2"]
    assert survival_problems({"a": 1}, {}, "R")
    assert survival_problems({"b": ("X", {})}, {"b": ("Y", {})}, "R")


# ---------------------------------------------------------------- bad bytes are SchemaErrors


def _command_bytes() -> bytes:
    """A valid Command written by the latest frozen version (built in the test, not at import)."""
    latest = available_versions()[-1]
    value = {
        "event_id": "e1",
        "aggregate_key": "wf-1",
        "timestamp_ms": 1,
        "trace_id": None,
        "request_id": "r1",
        "idempotency_key": "r1",
        "expected_version": None,
        "run_id": None,
        "body": (
            "StartWorkflow",
            {
                "workflow_type": "W",
                "task_queue": "q",
                "input": b"[1,2]",
                "id_reuse_policy": "allow_duplicate",
                "run_timeout_ms": None,
                "search_attributes": {},
            },
        ),
    }
    return write(parse_set(load_schema_set(latest)), "Command", value, latest)


BAD_BYTES = {
    "version 0": lambda ok: b"K" + bytes([0]) + ok[2:],
    "version after the latest": lambda ok: b"K" + bytes([available_versions()[-1] + 1]) + ok[2:],
    "version 255": lambda ok: b"K" + bytes([255]) + ok[2:],
    "bad magic": lambda ok: b"X" + ok[1:],
    "Confluent wire format (magic 0)": lambda ok: b"\x00" + ok[1:],
    "empty": lambda ok: b"",
    "tombstone (None)": lambda ok: None,
    "prefix only": lambda ok: ok[:2],
    "trailing bytes": lambda ok: ok + b"\x00",
    "garbage body": lambda ok: ok[:2] + b"\xff" * 40,
    "negative length": lambda ok: ok[:2] + b"\x01abc",
}


@pytest.mark.parametrize("why", sorted(BAD_BYTES))
def test_bad_bytes_raise_schema_error(why):
    ok = _command_bytes()
    assert serde.decode("Command", ok)["aggregate_key"] == "wf-1"
    with pytest.raises(SchemaError):
        serde.decode("Command", BAD_BYTES[why](ok))


@pytest.mark.parametrize("record", record_names(load_schema_set()))
def test_every_truncation_raises_schema_error(record):
    samples = Samples(load_schema_set())
    schema = next(s for s in load_schema_set() if s["name"] == record)
    for value in samples.variants(schema, record)[:4]:
        data = serde.encode(record, value)
        n = len(data)
        # every cut of small records; for big ones (a WorkflowTask with all its events) both ends
        # byte by byte and the middle in steps, which keeps this fast
        cuts = range(n) if n <= 400 else sorted({*range(200), *range(n - 200, n), *range(0, n, max(13, n // 300))})
        for cut in cuts:
            with pytest.raises(SchemaError):
                serde.decode(record, data[:cut])
                pytest.fail(f"{record} truncated to {cut} of {len(data)} bytes decoded without error")


def test_unknown_record_type_is_a_schema_error():
    with pytest.raises(SchemaError):
        serde.decode("NoSuchRecord", b"K\x01")
    with pytest.raises(SchemaError):
        serde.encode("NoSuchRecord", {})


def test_an_eager_task_carries_every_command_a_workflow_task_does():
    """The two unions of workflow commands are one list: a command only a workflow task could
    carry made the worker's results transaction fail on an eager task (found with updates)."""
    current = {s["name"]: s for s in load_schema_set(None)}

    def commands(record: str) -> list:
        field = next(f for f in current[record]["fields"] if f["name"] == "commands")
        return field["type"]["items"]

    assert commands("EagerWorkflowTask") == commands("RespondWorkflowTaskCompleted")
