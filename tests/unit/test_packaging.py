"""The distribution exposes every folder under the one `kadence` namespace, schemas included."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_every_package_and_every_schema_version(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    [wheel] = tmp_path.glob("kadence-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in (
        "kadence",
        "kadence/topics",
        "kadence/processors",
        "kadence/gateway",
        "kadence/connectors",
        "kadence/cli",
        "kadence/samples",
        "kadence/schemas",
    ):
        assert f"{package}/__init__.py" in names, package
    assert "kadence/workflow.py" in names and "kadence/topics/serde.py" in names
    for manifest in (ROOT / "schemas" / "versions").glob("*.json"):
        assert f"kadence/schemas/versions/{manifest.name}" in names
    for stored in (ROOT / "schemas" / "store").glob("*.avsc"):
        assert f"kadence/schemas/store/{stored.name}" in names
    assert not any(n.startswith(("tests/", "bench/", "sdk/", "topics/")) for n in names)
