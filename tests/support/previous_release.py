"""``python -m tests.support.previous_release ...``: the ``kadence`` CLI as the release before
this one sees the wire: it knows schema versions up to ``KADENCE_TEST_LAST_VERSION`` (default:
the current version minus one) and nothing newer, reads and writes that version's schemas.

Only the schemas are the old release's; the code is today's. That is what a rolling upgrade
exercises on the wire: whether records the new release writes can be read by instances not yet
upgraded (``KADENCE_SCHEMA_WRITE_VERSION``, issue 20). The patch is applied before any codec
is made (importing ``kadence`` makes none).
"""

import os
import sys

import kadence.schemas as schemas
from kadence.topics import serde
from tests.support.codecs import remake_codecs

_LAST = int(os.environ.get("KADENCE_TEST_LAST_VERSION", schemas.CURRENT_VERSION - 1))
_all_versions = schemas.available_versions
_load = schemas.load_schema_set


def _available() -> list[int]:
    return [v for v in _all_versions() if v <= _LAST]


def _load_set(version=None):
    return _load(_LAST if version is None else version)


for module in (schemas, serde):
    module.CURRENT_VERSION = _LAST
    module.available_versions = _available
    module.load_schema_set = _load_set
# importing ``kadence`` made no codec yet; clear the caches anyway, so nothing of the current
# schemas survives the patch
serde._parsed.cache_clear()
remake_codecs()

if __name__ == "__main__":
    from kadence.cli.main import main

    main(sys.argv[1:])
