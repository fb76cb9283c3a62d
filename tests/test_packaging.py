"""The wheel installs one namespace, `geosched`, with its data and its console script, and no test double: the
emulators are their own distribution, geosched-emulators (emulators/, issue 25 item 4)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    return next(out.glob("geosched-*.whl"))


def test_wheel_holds_only_the_geosched_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"geosched", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    for module in ("geosched/policies/zone_first.py", "geosched/providers/__init__.py", "geosched/probes/__init__.py",
                   "geosched/data/aws_gpu_vms.csv", "geosched/data/SOURCES.md", "geosched/data/jobs/train-64.yaml",
                   "geosched/py.typed"):
        assert module in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "geosched = geosched.cli.entry:main" in entry_points  # --version before the CLI loads


def test_the_product_wheel_holds_no_test_double(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    doubles = [n for n in names if "emulator" in n.lower() or n.rsplit("/", 1)[-1] in (
        "gce.py", "faultproxy.py", "ec2_extras.py", "eks_extras.py", "billing.py")]
    assert doubles == []
    # Nor a test fixture: the hand-made fleets the tests and benchmarks build on live in tests/handmade.py (they were
    # geosched/core/testing.py, in every user's wheel, until the issue 25 audit).
    assert [n for n in names if n.rsplit("/", 1)[-1] in ("testing.py", "handmade.py") or "/tests/" in n] == []
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("/METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires and not [r for r in requires if "moto" in r]  # not even as an extra: that dependency is theirs


def test_the_emulators_are_a_wheel_of_their_own(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT / "emulators")], check=True, capture_output=True, timeout=300)
    built = next(tmp_path.glob("geosched_emulators-*.whl"))
    names = zipfile.ZipFile(built).namelist()
    assert {n.split("/")[0] for n in names} == {"geosched_emulators", built.name.split("-")[0] + "-"
                                                + built.name.split("-")[1] + ".dist-info"}
    assert {"geosched_emulators/gce.py", "geosched_emulators/faultproxy.py", "geosched_emulators/py.typed"} <= set(
        names)


def test_installed_wheel_places_a_job_from_outside_the_repo(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    assert not (target / "policies").exists() and not (target / "providers").exists()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import geosched, geosched.policies as p; "
            "from geosched.demo import demo_jobs; from geosched.core.default_fleet import default_fleet, "
            "default_network; "
            "assert geosched.__file__.startswith(sys.argv[1]), geosched.__file__; "
            "ctx = p.PlacementContext(default_fleet(), default_network()); "
            "print(p.place(demo_jobs()[1], ctx).zones)")
    run = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("(")
