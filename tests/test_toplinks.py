"""One identity per module (issue 25 item 5): the top-level `policies/`, `providers/`, `probes/` links into
geosched/ stay, but a module imported through them is the geosched module itself, whichever way comes first.

Each case runs in a fresh interpreter (the order of the first imports is the point), from the checkout, with `.`
on sys.path as pytest, a notebook or `python -c` in the repository has it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def run(code: str, cwd: Path = ROOT, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": path if path is not None else str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_the_links_are_still_there() -> None:
    for name in ("policies", "providers", "probes"):
        link = ROOT / name
        assert link.is_symlink() and link.resolve() == (ROOT / "geosched" / name).resolve()


@pytest.mark.parametrize("first", ["link", "geosched"])
def test_policies_both_ways_register_each_policy_once(first: str) -> None:
    # The reproduction: `import policies; import geosched.policies` raised "policy 'spread' registered twice".
    imports = ["import policies", "import geosched.policies"]
    code = "\n".join(imports if first == "link" else imports[::-1]) + (
        "\nassert policies is geosched.policies, (policies, geosched.policies)"
        "\nimport policies.zone_first, geosched.policies.zone_first"
        "\nassert policies.zone_first is geosched.policies.zone_first"
        "\nprint(policies.names())")
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert "'spread'" in done.stdout and "'zone-first'" in done.stdout


@pytest.mark.parametrize("first", ["link", "geosched"])
def test_a_provider_class_is_one_class_both_ways(first: str) -> None:
    imports = ["import providers.aws", "import geosched.providers.aws"]
    code = "\n".join(imports if first == "link" else imports[::-1]) + (
        "\nassert providers.aws.AwsProvider is geosched.providers.aws.AwsProvider"
        "\nfrom providers.base import Provider"
        "\nfrom geosched.providers.base import Provider as Same"
        "\nassert Provider is Same"
        "\nimport probes, geosched.probes; assert probes is geosched.probes"
        "\nimport sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('policies', 'providers', 'probes')"
        " and sys.modules[m] is not sys.modules.get('geosched.' + m)))")
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # every module reached through a link is the geosched one


def test_the_modules_keep_their_own_names_and_specs() -> None:
    done = run("import policies.base as b, importlib; print(b.__name__, b.__spec__.name); importlib.reload(b)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["geosched.policies.base", "geosched.policies.base"]


def test_an_applications_own_providers_package_is_left_alone(tmp_path: Path) -> None:
    # Someone else's top-level `providers`, beside an installed geosched: not ours, so not aliased.
    (tmp_path / "providers").mkdir()
    (tmp_path / "providers" / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "providers" / "aws.py").write_text("WHOSE = 'mine'\n")
    done = run("import geosched, providers, providers.aws\nassert providers.MINE and providers.aws.WHOSE == 'mine'\n"
               "import geosched.providers; assert geosched.providers is not providers",
               cwd=tmp_path, path=f"{tmp_path}{os.pathsep}{ROOT}")
    assert done.returncode == 0, done.stderr
