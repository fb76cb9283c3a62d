"""README.md's "Run it on your clusters" section, read as its tests run it: the section, its code blocks and the
commands of its bash blocks (tests/kubeapi/test_readme_clusters.py on emulated clusters,
tests/realkube/test_realkube_readme_clusters.py on the real control plane)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GKE_CONTEXT = "gke_ml-platform-prod_us-central1_gpu-central"  # what `gcloud ... get-credentials` names it


def section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Run it on your clusters\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", section(), re.S)


def commands() -> list[str]:
    return [line for block in blocks("bash") for line in block.splitlines() if line.strip()]


def write_files(directory: Path) -> None:
    """Each yaml block of the section into the file its first line (`# name`) names."""
    for block in blocks("yaml"):
        name = block.splitlines()[0].removeprefix("# ").strip()
        (directory / name).write_text(block, encoding="utf-8")


def as_cloud_cli_left_it(kubeconfig: Path, out: Path, gke: str = "gke-us-central1") -> Path:
    """The kubeconfig as `aws eks update-kubeconfig --alias eks-us-east-1` and `gcloud container clusters
    get-credentials` leave it: the EKS context under its alias, the GKE one (`gke`) under gcloud's generated name."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    for context in config["contexts"]:
        if context["name"] == gke:
            context["name"] = GKE_CONTEXT
    out.write_text(yaml.safe_dump(config), encoding="utf-8")
    out.chmod(0o600)
    return out
