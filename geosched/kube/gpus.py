"""GPU names and counts as Kubernetes writes them, turned into the catalog's names and plain integers."""

from __future__ import annotations

import re
from typing import Any

# Base parts named in `nvidia.com/gpu.product` values (GPU feature discovery: the driver's product name
# with spaces as dashes, e.g. NVIDIA-A100-SXM4-80GB, Tesla-V100-SXM2-16GB, NVIDIA-H100-80GB-HBM3).
_BASES = ("A100", "A10G", "H100", "H200", "L4", "L40S", "T4", "V100", "K80", "M60", "P4", "P100", "K520")
# Memory variants the catalog prices separately.
_VARIANTS = {("A100", "80GB"): "A100-80GB", ("V100", "32GB"): "V100-32GB"}
_WHOLE = re.compile(r"^[0-9]+$")


def model_from_product(product: str) -> str | None:
    """The catalog GPU model for a product label, or None when it names no known part.

    A MIG slice (`...-MIG-1g.5gb`) is a fraction of a GPU, not the GPU a gang asks for, so it is unknown.
    """
    tokens = product.upper().replace("_", "-").split("-")
    if "MIG" in tokens:
        return None
    for base in _BASES:
        if base in tokens:
            for (variant_base, memory), name in _VARIANTS.items():
                if base == variant_base and memory in tokens:
                    return name
            return base
    return None


def whole_count(value: Any) -> int | None:
    """A Kubernetes quantity that must be a whole number (extended resources are never fractional)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and _WHOLE.match(value.strip()):
        return int(value.strip())
    return None
