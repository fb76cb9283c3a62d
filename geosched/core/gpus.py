"""GPU names: the one table of them (`PARTS`) and the one resolver every path uses (`resolve`: job files, flags,
the catalog, Kubernetes labels). Pure.

Label values both ways: label values -> the catalog's model, and the catalog's model -> the label values a node
with that GPU carries.

Sources of the label values:
- `nvidia.com/gpu.product`: NVIDIA GPU feature discovery (GFD, part of the GPU operator) writes the driver's
  product name with spaces as dashes (github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery: e.g.
  `NVIDIA-H100-80GB-HBM3`, `NVIDIA-A100-SXM4-40GB`, `NVIDIA-A10G`, `NVIDIA-L4`, `Tesla-T4`, `Tesla-V100-SXM2-16GB`).
  The parts are those of the cloud instance types the catalog prices (p4d and a2-highgpu: A100 SXM4 40GB; p4de
  and a2-ultragpu: A100 SXM4 80GB; p5 and a3-highgpu/-megagpu: H100 SXM5 80GB HBM3; p3: V100 SXM2 16GB; p3dn:
  V100 SXM2 32GB).
- `cloud.google.com/gke-accelerator`: GKE sets the Compute Engine accelerator type on GPU nodes
  (cloud.google.com/kubernetes-engine/docs/how-to/gpus: `nvidia-tesla-a100`, `nvidia-a100-80gb`,
  `nvidia-h100-80gb`, `nvidia-h100-mega-80gb`, `nvidia-h200-141gb`, `nvidia-l4`, `nvidia-tesla-t4`, ...).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection

from geosched.clouds.spec import GpuPart  # the value type sits with the clouds, whose node labels it makes

PARTS: dict[str, GpuPart] = {
    "A100": GpuPart("NVIDIA-A100-SXM4-40GB", "nvidia-tesla-a100"),
    "A100-80GB": GpuPart("NVIDIA-A100-SXM4-80GB", "nvidia-a100-80gb"),
    "A10G": GpuPart("NVIDIA-A10G", None),
    "H100": GpuPart("NVIDIA-H100-80GB-HBM3", "nvidia-h100-80gb"),
    "H100-MEGA": GpuPart("NVIDIA-H100-80GB-HBM3", "nvidia-h100-mega-80gb"),
    "H200": GpuPart("NVIDIA-H200", "nvidia-h200-141gb"),
    "L4": GpuPart("NVIDIA-L4", "nvidia-l4"),
    "L40S": GpuPart("NVIDIA-L40S", None),
    "T4": GpuPart("Tesla-T4", "nvidia-tesla-t4"),
    "V100": GpuPart("Tesla-V100-SXM2-16GB", "nvidia-tesla-v100"),
    "V100-32GB": GpuPart("Tesla-V100-SXM2-32GB", None),
    "K80": GpuPart("Tesla-K80", "nvidia-tesla-k80"),
    "M60": GpuPart("Tesla-M60", None),
    "P4": GpuPart("Tesla-P4", "nvidia-tesla-p4"),
    "P100": GpuPart("Tesla-P100-PCIE-16GB", "nvidia-tesla-p100"),
    "K520": GpuPart("GRID-K520", None),
}

# Base parts named in `nvidia.com/gpu.product` values, and the memory variants the catalog prices separately.
_BASES = ("A100", "A10G", "H100", "H200", "L4", "L40S", "T4", "V100", "K80", "M60", "P4", "P100", "K520")
_VARIANTS = {("A100", "80GB"): "A100-80GB", ("V100", "32GB"): "V100-32GB"}
# Product-name tokens of a board form factor (the driver's names: "NVIDIA H100 PCIe", "NVIDIA H100 NVL"): a part
# named with one its catalog model's product lacks is another card.
_FORM_FACTORS = ("PCIE", "NVL")


def part(model: str) -> GpuPart:
    """The label values for a catalog GPU model (none known: a part that is not NVIDIA's, e.g. an AMD GPU)."""
    return PARTS.get(model, GpuPart(None, None))


def model_from_product(product: str) -> str | None:
    """The catalog GPU model for a product label, or None when it names no known part.

    A MIG slice (`...-MIG-1g.5gb`) is a fraction of a GPU, not the GPU a gang asks for, so it is unknown. So is
    another form factor of a catalog chip (`NVIDIA-H100-PCIe`, `NVIDIA-H100-NVL`, `NVIDIA-A100-PCIE-40GB`): the
    catalog's H100 and A100 are the SXM parts of p5/a3 and p4d/a2 (NVLink between the node's GPUs, 700 W for the
    H100), and a gang that asks for them must not get PCIe cards (`other_form_factor` says which chip it is).
    """
    model, other = _read_product(product)
    return None if other else model


def other_form_factor(product: str) -> str | None:
    """The catalog model whose chip `product` names in a form factor the catalog does not sell (`NVIDIA-H100-PCIe`:
    H100), None otherwise: a real part geosched has no offering of, not a misspelt one."""
    model, other = _read_product(product)
    return model if other else None


def _read_product(product: str) -> tuple[str | None, bool]:
    tokens = product.upper().replace("_", "-").split("-")
    if "MIG" in tokens:
        return None, False
    for base in _BASES:
        if base in tokens:
            model = next((name for (variant_base, memory), name in _VARIANTS.items()
                          if base == variant_base and memory in tokens), base)
            catalog_tokens = set((part(model).product or "").upper().split("-"))
            return model, any(f in tokens and f not in catalog_tokens for f in _FORM_FACTORS)
    return None, False


def model_from_gke_accelerator(accelerator: str) -> str | None:
    """The catalog GPU model for a `cloud.google.com/gke-accelerator` value, or None when it names no known part."""
    return next((model for model, p in PARTS.items() if p.gke_accelerator == accelerator), None)


class GpuNameError(ValueError):
    """A GPU name that names no known model; the message says which were meant, if any look alike."""


def resolve(name: str, known: Collection[str]) -> str:
    """The model in `known` (the catalog's names: A100, A100-80GB, H100, L4, ...) that `name` means, whatever the
    habit it is written in: any case (`a100`), with its memory (`A100-40GB`, `H100 80GB`, `a100_80gb`), as GPU
    feature discovery labels it (`NVIDIA-H100-80GB-HBM3`), or as GKE does (`nvidia-h100-80gb`)."""
    text = name.strip()
    exact = {k.upper(): k for k in known}
    for candidate in (text.upper(), model_from_gke_accelerator(text.lower()),
                      model_from_product(re.sub(r"[\s_]+", "-", text))):
        if candidate is not None and candidate.upper() in exact:
            return exact[candidate.upper()]
    close = difflib.get_close_matches(text.upper(), list(exact), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(exact[c] for c in close)}?" if close else ""
    raise GpuNameError(f"unknown GPU model {name!r}{hint} (`geosched gpus` lists them)")
