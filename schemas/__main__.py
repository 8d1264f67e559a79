"""``python -m kadence.schemas freeze [N]``: freeze the current schemas as version N (default:
``CURRENT_VERSION``), writing ``versions/N.json`` and the store files it needs.

``python -m kadence.schemas types``: write ``records.py``, the records' ``TypedDict``
definitions, from the current schemas (``kadence.schemas.typegen``)."""

from __future__ import annotations

import sys

from . import CURRENT_VERSION, freeze


def main(argv: list[str]) -> int:
    if argv == ["types"]:
        from .typegen import write

        print(f"wrote {write()}")
        return 0
    if not argv or argv[0] != "freeze" or len(argv) > 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    version = int(argv[1]) if len(argv) == 2 else CURRENT_VERSION
    try:
        path = freeze(version)
    except FileExistsError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"froze schema version {version}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
