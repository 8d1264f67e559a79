"""The environment the suite runs in is exactly requirements.lock (what `make venv` installs)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("kadence_lock", ROOT / "scripts" / "lock.py")
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)


def test_the_installed_packages_are_the_locked_versions():
    assert lock.differences(lock.locked(), lock.installed()) == []


def test_every_dependency_in_pyproject_is_locked():
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = lock.locked()
    for raw in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(raw)
        if req.marker is None or req.marker.evaluate():
            name = lock.canonicalize_name(req.name)
            assert name in pins, f"{name} is not in requirements.lock (run `make lock`)"
            assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {req.specifier}"


def test_differences_name_what_is_missing_extra_or_at_another_version():
    pins = {"a": "1.0", "b": "2.0"}
    have = {"a": "1.0", "b": "2.1", "c": "3", "pip": "24", "kadence": "0.1.0"}
    assert lock.differences(pins, have) == ["version: b is 2.1, locked 2.0", "not locked: c==3"]
    assert lock.differences({"d": "1"}, {}) == ["missing: d==1"]
