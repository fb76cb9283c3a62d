"""One GPU name resolver for every path (issue 14): job files, --gpu flags and the catalog filter accept the names
people and tools use, and an unknown one gets a "did you mean"."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core import catalog
from geosched.core.errors import InputError
from geosched.core.gpus import GpuNameError, resolve
from geosched.files.documents import parse_job
from geosched.providers.cliparts import parse_gpu
from tests.test_cli import geosched

KNOWN = catalog.gpu_models()


@pytest.mark.parametrize(("name", "model"), [
    ("A100", "A100"), ("a100", "A100"), (" h100 ", "H100"),
    ("A100-40GB", "A100"), ("A100 80GB", "A100-80GB"), ("a100_80gb", "A100-80GB"), ("H100-80GB", "H100"),
    # GPU feature discovery's nvidia.com/gpu.product values (github.com/NVIDIA/k8s-device-plugin, GFD)
    ("NVIDIA-H100-80GB-HBM3", "H100"), ("NVIDIA-A100-SXM4-80GB", "A100-80GB"), ("NVIDIA-A10G", "A10G"),
    ("Tesla-T4", "T4"),
    # GKE's cloud.google.com/gke-accelerator values
    ("nvidia-h100-80gb", "H100"), ("nvidia-tesla-a100", "A100"), ("nvidia-l4", "L4"),
])
def test_names_in_every_habit_resolve_to_the_catalog_model(name: str, model: str) -> None:
    assert resolve(name, KNOWN) == model


def test_an_unknown_name_says_what_was_meant() -> None:
    with pytest.raises(GpuNameError, match=r"unknown GPU model 'H10'; did you mean H100"):
        resolve("H10", KNOWN)
    with pytest.raises(GpuNameError, match="`geosched gpus` lists them"):
        resolve("quantum-9000", KNOWN)
    # A MIG slice is a fraction of a GPU, not the GPU a gang asks for.
    with pytest.raises(GpuNameError):
        resolve("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", KNOWN)


def test_job_files_and_flags_take_the_same_names() -> None:
    # Before: `gpu: a100` in a job file was refused while `--gpu a100` was accepted.
    job = parse_job({"name": "j", "workers": 1, "gpus_per_worker": 8, "gpu": "a100"}, "job.yaml")
    assert job.gpu == "A100"
    assert parse_job({"name": "j", "workers": 1, "gpus_per_worker": 8, "gpu": "NVIDIA-H100-80GB-HBM3"},
                     "job.yaml").gpu == "H100"
    assert parse_gpu("nvidia-l4:4") == ("L4", 4)
    with pytest.raises(InputError, match=r"job\.yaml: gpu: unknown GPU model 'H10'; did you mean H100"):
        parse_job({"name": "j", "workers": 1, "gpus_per_worker": 8, "gpu": "H10"}, "job.yaml")
    with pytest.raises(InputError, match="did you mean"):
        parse_gpu("H10:8")


def test_gpus_command_and_catalog_filter(tmp_path: Path) -> None:
    listed = geosched("gpus", "-o", "json", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert '"gfd_product": "NVIDIA-H100-80GB-HBM3"' in listed.stdout
    rows = geosched("catalog", "--gpu", "NVIDIA-H100-80GB-HBM3:8", "-o", "json", home=tmp_path)
    assert rows.returncode == 0, rows.stderr
    assert '"gpu": "H100"' in rows.stdout and '"gpu": "A100"' not in rows.stdout
    bad = geosched("catalog", "--gpu", "H10", home=tmp_path)
    assert bad.returncode == 2 and "did you mean H100" in bad.stderr and "Traceback" not in bad.stderr
