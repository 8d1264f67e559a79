"""The deployment files (issue 43): ``docker-compose.yml`` is valid against the compose
specification's JSON schema (the one its reference implementation, compose-go, validates with,
fetched from the Go module proxy at a pinned version and hash), and the ``Dockerfile`` parses with
BuildKit's own parser, passes hadolint and copies only what exists. No container engine runs here:
tests/cluster/test_compose.py runs the compose services' command lines outside containers."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import dockerfile
import jsonschema
import pytest
import yaml

from kadence.devstack.services import cache_root

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_GO = "v2.16.2"
COMPOSE_GO_ZIP = f"https://proxy.golang.org/github.com/compose-spec/compose-go/v2/@v/{COMPOSE_GO}.zip"
COMPOSE_GO_ZIP_SHA256 = "75410c9723430b920592093014fc53641f6207e01b52c016c848ba62bf2da805"
SCHEMA_MEMBER = f"github.com/compose-spec/compose-go/v2@{COMPOSE_GO}/schema/compose-spec.json"


def compose_schema() -> dict:
    """The compose specification's schema, from the cache or the module proxy (checked)."""
    cached = cache_root() / f"compose-spec-{COMPOSE_GO}.json"
    if not cached.exists():
        with urllib.request.urlopen(COMPOSE_GO_ZIP, timeout=60) as reply:
            data = reply.read()
        digest = hashlib.sha256(data).hexdigest()
        assert digest == COMPOSE_GO_ZIP_SHA256, f"compose-go {COMPOSE_GO} from the proxy has sha256 {digest}"
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(zipfile.ZipFile(io.BytesIO(data)).read(SCHEMA_MEMBER))
    return json.loads(cached.read_text())


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def kadence_services(spec: dict) -> dict[str, dict]:
    return {name: s for name, s in spec["services"].items() if s.get("image", "").startswith("kadence")}


@pytest.fixture(scope="module")
def schema() -> dict:
    try:
        return compose_schema()
    except OSError as exc:  # no network and no cache: a failure to fix, not a skip
        pytest.fail(f"the compose schema is not cached and could not be fetched: {exc}")


def test_the_compose_file_is_valid_against_the_compose_specification(schema):
    jsonschema.validate(compose(), schema, cls=jsonschema.Draft202012Validator)


def test_the_schema_check_catches_a_misspelt_key(schema):
    spec = compose()
    spec["services"]["processor"]["helthcheck"] = spec["services"]["processor"].pop("healthcheck")
    with pytest.raises(jsonschema.ValidationError, match="helthcheck"):
        jsonschema.validate(spec, schema, cls=jsonschema.Draft202012Validator)


def test_every_component_is_a_service_of_the_kadence_image_with_a_readiness_check():
    services = kadence_services(compose())
    commands = {s["command"][0] for s in services.values()}
    assert {"topics", "processor", "timers", "projections", "gateway", "worker"} <= commands
    for name, service in services.items():
        if service["command"][:2] == ["topics", "apply"]:
            continue  # a one-shot step, not a server
        probe = " ".join(service["healthcheck"]["test"])
        port = re.search(r"127\.0\.0\.1:(\d+)/readyz", probe)
        assert port, f"{name}: the health check does not ask /readyz: {probe}"
        assert port.group(1) in service["command"], f"{name} listens elsewhere than its check asks"


def test_every_service_command_is_a_kadence_command_with_options_it_knows():
    from click.testing import CliRunner

    from kadence.cli import main

    for name, service in kadence_services(compose()).items():
        result = CliRunner().invoke(main, [*service["command"], "--help"])
        assert result.exit_code == 0, f"{name}: kadence {' '.join(service['command'])}: {result.output}"
        options = [arg for arg in service["command"] if arg.startswith("--")]
        for option in options:
            assert option in result.output, f"{name}: {option} is not an option of its command"


def test_the_services_depend_on_services_that_exist():
    spec = compose()
    for name, service in spec["services"].items():
        for needed in service.get("depends_on") or {}:
            assert needed in spec["services"], f"{name} depends on {needed}, which is not a service"


def test_the_dockerfile_parses_and_copies_only_what_the_tree_has():
    commands = dockerfile.parse_file(str(ROOT / "Dockerfile"))
    assert [c.value for c in commands if c.cmd == "FROM"], "no FROM"
    entrypoints = [c for c in commands if c.cmd == "ENTRYPOINT"]
    assert entrypoints and entrypoints[-1].json and entrypoints[-1].value == ("kadence",)
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    copied = set()
    for c in commands:
        if c.cmd == "COPY" and not any(flag.startswith("--from") for flag in c.flags):
            for source in c.value[:-1]:
                path = source.rstrip("/")
                assert (ROOT / path).exists(), f"COPY {source}: not in the tree"
                assert path not in ignored, f"COPY {source}: .dockerignore leaves it out of the context"
                copied.add(path)
    # every folder the package maps onto the `kadence` namespace reaches the image
    import tomllib

    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert set(package_dir.values()) <= copied, set(package_dir.values()) - copied
    assert {"pyproject.toml", "README.md"} <= copied


def test_hadolint_finds_nothing_in_the_dockerfile():
    hadolint = Path(sys.executable).parent / "hadolint"
    out = subprocess.run([str(hadolint), "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_image_lock_pins_the_versions_the_suite_ran_with():
    pins = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)
    image = dict(pins.findall((ROOT / "requirements-image.lock").read_text()))
    tested = dict(pins.findall((ROOT / "requirements.lock").read_text()))
    assert image, "requirements-image.lock pins nothing"
    different = {name: (v, tested.get(name)) for name, v in image.items() if tested.get(name) != v}
    assert different == {}, f"run `make lock`: {different}"
    assert "pytest" not in image and "playwright" not in image  # the runtime only
