"""Property tests of the generated Avro codecs (issue 20, item 5): for values hypothesis draws
from every record schema of the current set, the generated writer's bytes are fastavro's, byte
for byte, and the generated reader gives back the value fastavro reads."""

from __future__ import annotations

import functools
import io
import math
import os

import fastavro
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kadence.topics import avro_codegen, serde
from tests.support.avro_samples import RECORDS
from tests.support.avro_strategies import record_values
from tests.support.fastavro_reference import qualify, short_names


def _same(a, b) -> bool:
    """Equality with float32 rounding and -0.0 taken as Avro has them (fastavro's read is the truth)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    return a == b


#: examples per record type: 50 in ``make test`` (about 5 s for all of them on a quiet machine);
#: ``KADENCE_PROPERTY_EXAMPLES=500`` for a deeper run
EXAMPLES = int(os.environ.get("KADENCE_PROPERTY_EXAMPLES", "50"))


@functools.cache
def _codecs(record: str):
    schema = serde.codec(record)._schema
    return schema, avro_codegen.compile_writer(schema), avro_codegen.compile_reader(schema)


@pytest.mark.parametrize("record", RECORDS)
# derandomized: the same examples in every run (a CI run is reproducible); no "explain" phase
# (it traces every line the test runs, minutes for the large records)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_generated_codecs_match_fastavro_byte_for_byte(record, data):
    value = data.draw(record_values(record))
    schema, put, get = _codecs(record)
    ours = bytearray()
    put.fast(ours, value)
    ref = io.BytesIO()
    fastavro.schemaless_writer(ref, schema, qualify(value))
    assert bytes(ours) == ref.getvalue()
    read_back, end = get.fast(bytes(ours), 0)
    assert end == len(ours)
    expected = short_names(
        fastavro.schemaless_reader(
            io.BytesIO(bytes(ours)), schema, None, return_record_name=True, return_record_name_override=True
        )
    )
    assert _same(read_back, expected)
