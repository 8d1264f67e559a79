"""The error tree drawn in ``kadence.topics.errors``' docstring is the tree (issue 49): every
``KadenceError`` subclass of the package is drawn, under a class it derives from, and nothing is
drawn that does not exist. A new error class without its line fails here."""

from __future__ import annotations

import importlib
import re

from kadence.topics import errors
from tests.support.tree import FOLDERS, module_name, source_files

#: classes that never reach a user as an exception, not part of the users' tree: a bridge's
#: record that cannot be mapped (it goes to the dead-letter topic), and the gateway's namespace
#: whose topics cannot be used (its error handler answers 503)
INTERNAL = {"kadence.connectors.bridges.BadRecord", "kadence.gateway.engines.NamespaceUnavailable"}

_LINE = re.compile(r"^(?P<indent>[\s│]*)[├└]── (?P<name>\w+)")


def _drawn() -> dict[str, str]:
    """Class name -> its parent's name, from the drawing (4 columns a level)."""
    parents: dict[str, str] = {}
    path: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        if line.strip() == "KadenceError":
            path = ["KadenceError"]
            continue
        m = _LINE.match(line)
        if not m or not path:
            continue
        depth = (len(m.group("indent")) - 4) // 4 + 1  # the root is drawn 4 columns in
        del path[depth:]
        parents[m.group("name")] = path[-1]
        path.append(m.group("name"))
    return parents


def _every_error_class() -> set[type]:
    # every product module, from the repository's folders (``kadence.__path__`` is the SDK's
    # folder alone: walking it missed the other packages' classes unless a test had imported them)
    for folder in FOLDERS:
        for path in source_files(folder):
            if path.name != "__main__.py":  # (runs a command line)
                importlib.import_module(module_name(folder, path))
    found: set[type] = set()
    todo = [errors.KadenceError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return {c for c in found if f"{c.__module__}.{c.__qualname__}" not in INTERNAL}


def test_every_error_class_is_drawn_under_a_class_it_derives_from():
    drawn = _drawn()
    assert len(drawn) > 40  # the drawing was read
    classes = {c.__name__: c for c in _every_error_class()}
    missing = sorted(set(classes) - set(drawn))
    assert missing == [], f"draw these in kadence.topics.errors' tree: {missing}"
    gone = sorted(set(drawn) - set(classes))
    assert gone == [], f"drawn but not defined: {gone}"
    wrong = [
        f"{name} is drawn under {parent}"
        for name, parent in drawn.items()
        if parent not in {b.__name__ for b in classes[name].__mro__[1:]}
    ]
    assert wrong == [], wrong
