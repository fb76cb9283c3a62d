"""What an hour of a machine the user owns costs: its purchase spread over its life, plus its power.

Owned machines (an on-prem or HPC site in the SSH inventory) have no cloud price; priced at $0/h they made the cost
term explode or, without a price, were not eligible at all (issue 23 item 2). An inventory node without
`price_ondemand` is priced here, per GPU:

    $/GPU-h = purchase $ per GPU / (LIFE_YEARS x 8760 h) + max W / 1000 x USD_PER_KWH

- purchase $ per GPU: data/owned_gpu_cost.csv (a vendor's 8-GPU system list price / 8, source per row);
- LIFE_YEARS = 4: the depreciation period the issue names, shorter than the 5-6 years hyperscalers now book for
  servers, because GPUs are replaced sooner than CPUs (an assumption: state price_ondemand to use your own);
- power at the GPU's max draw (data/gpu_power.csv) times USD_PER_KWH = 0.08, the US industrial average retail
  price of electricity (EIA Electric Power Monthly, table 5.6.A, 2023: 8.0 cents/kWh,
  https://www.eia.gov/electricity/monthly/epm_table_grapher.php?t=epmt_5_6_a).

An H100 comes to $0.77/GPU-h ($6.13/h for 8), against $12.29/GPU-h for a p5.48xlarge on demand: owned machines stay
much cheaper, but not free, so the cost term compares them with the clouds on one scale (policies/README.md).
A GPU model without a row stays unpriced, as before. Pure: reads only the shipped data.
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources

from geosched.core import catalog

LIFE_YEARS = 4.0
USD_PER_KWH = 0.08
HOURS_PER_YEAR = 8760.0
# Variants of a part cost what the part costs (as catalog.gpu_power treats their power).
VARIANTS = {"A100-80GB": "A100", "H100-MEGA": "H100"}


@cache
def purchase_usd_per_gpu() -> dict[str, float]:
    with resources.files("geosched.data").joinpath("owned_gpu_cost.csv").open(encoding="utf-8") as fh:
        return {row["gpu"]: float(row["purchase_usd_per_gpu"]) for row in csv.DictReader(fh)}


def usd_per_gpu_hour(gpu: str) -> float | None:
    """The amortised $/h of one owned GPU of model `gpu`, or None when the data has no purchase price for it."""
    model = gpu if gpu in purchase_usd_per_gpu() else VARIANTS.get(gpu, gpu)
    purchase = purchase_usd_per_gpu().get(model)
    if purchase is None:
        return None
    power = catalog.gpu_power().get(gpu) or catalog.gpu_power().get(model)
    watts = power.max_watts if power is not None else 0.0
    return purchase / (LIFE_YEARS * HOURS_PER_YEAR) + watts / 1000 * USD_PER_KWH


def usd_per_hour(gpu: str, gpus: int) -> float | None:
    """A node of `gpus` owned GPUs: its amortised $/h, or None (unpriced)."""
    per_gpu = usd_per_gpu_hour(gpu)
    return None if per_gpu is None else round(per_gpu * gpus, 4)
