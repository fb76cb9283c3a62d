"""The shipped catalog: offerings per zone, regions with grid carbon and PUE, GPU power.

Read once from the CSV files in `geosched/data` (provenance in data/SOURCES.md). Rows the price checks flag
(`pricecheck`) carry their flags and a note in the CSV; the flags are acted on here, so every caller (placement,
provision plans, the default fleet, `catalog`) sees the same cleaned offerings: a spot price above on-demand is
no spot price, a type ordinary projects cannot launch is not offered, and the note travels with the offering.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import resources

from geosched import clouds
from geosched.core.models import GpuPower, Offering, Region, Zone, region_key
from geosched.core.pricecheck import launchable

# Where a datasheet gives only TDP, idle is taken at the A100's measured idle/max ratio (46/407 W,
# cloud-carbon-footprint), so TDP-only GPUs follow the same utilisation model as the others.
IDLE_TO_MAX_RATIO = 46.0 / 407.0


def _rows(name: str) -> Iterator[dict[str, str]]:
    with resources.files("geosched.data").joinpath(name).open(encoding="utf-8") as fh:
        yield from csv.DictReader(fh)


def _opt_float(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def gpu_power() -> dict[str, GpuPower]:
    table: dict[str, GpuPower] = {}
    for row in _rows("gpu_power.csv"):
        idle, peak, tdp = (_opt_float(row[k]) for k in ("idle_watts", "max_watts", "tdp_watts"))
        if peak is None and tdp is not None:
            peak, idle = tdp, tdp * IDLE_TO_MAX_RATIO
        if peak is None or idle is None:
            continue
        table[row["gpu"]] = GpuPower(row["gpu"], idle, peak)
    # Catalog GPU names that are variants of a measured part draw what the part draws.
    for variant, base in (("A100-80GB", "A100"), ("H100-MEGA", "H100"), ("V100-32GB", "V100")):
        if base in table and variant not in table:
            table[variant] = GpuPower(variant, table[base].idle_watts, table[base].max_watts)
    return table


@cache
def regions() -> dict[str, Region]:
    out: dict[str, Region] = {}
    for row in _rows("region_carbon.csv"):
        region = Region(
            provider=row["provider"],
            name=row["region"],
            grid_gco2e_per_kwh=float(row["grid_gco2e_per_kwh"]),
            pue=float(row["pue"]),
            cfe_fraction=_opt_float(row["cfe_fraction"]),
        )
        out[region.key] = region
    return out


@cache
def offerings() -> tuple[Offering, ...]:
    power = gpu_power()
    out: list[Offering] = []
    for provider, name in ((s.name, s.catalog_file) for s in clouds.all_specs() if s.catalog_file is not None):
        for row in _rows(name):
            flags = set(row.get("flags", "").split())
            if "not-launchable" in flags or not launchable(provider, row["instance_type"]):
                continue
            gpu = row["gpu"]
            watts = power.get(gpu)
            out.append(
                Offering(
                    provider=provider,
                    instance_type=row["instance_type"],
                    gpu=gpu,
                    gpus=int(row["gpu_count"]),
                    vcpus=float(row["vcpus"]),
                    memory_gib=float(row["memory_gib"]),
                    region=row["region"],
                    zone=row["zone_id"],
                    price_ondemand=_opt_float(row["price_ondemand_usd_h"]),
                    price_spot=None if "spot-above-ondemand" in flags else _opt_float(row["price_spot_usd_h"]),
                    gpu_idle_watts=watts.idle_watts if watts else None,
                    gpu_max_watts=watts.max_watts if watts else None,
                    note=f"{' '.join(sorted(flags))}: {row['note']}" if flags else None,
                )
            )
    one_cloud_per_zone(out)
    return tuple(out)


def one_cloud_per_zone(offers: Iterable[Offering]) -> None:
    """Refuse two clouds' catalogs naming the same zone. Fleets, placements and `zones()` key a zone by its name
    alone, so a new cloud whose zone is spelt like another cloud's (GCP's `us-central1-a`) would silently take that
    zone over, and its nodes would be placed as if beside the other cloud's. Raised when the shipped data is read:
    the mistake is the catalog's author's, to be caught by the first test that reads it."""
    owner: dict[str, str] = {}
    for offer in offers:
        first = owner.setdefault(offer.zone, offer.provider)
        if first != offer.provider:
            raise RuntimeError(f"zone {offer.zone!r} is in both the {first} and the {offer.provider} catalog "
                               "(geosched/data); a zone name must belong to one cloud")


@cache
def zones() -> dict[str, Zone]:
    return {o.zone: Zone(o.zone, o.provider, o.region) for o in offerings()}


@cache
def offering_index() -> dict[tuple[str, str, str], Offering]:
    """(provider, instance type, zone) -> offering."""
    return {(o.provider, o.instance_type, o.zone): o for o in offerings()}


def gpu_models() -> set[str]:
    return {o.gpu for o in offerings()} | set(gpu_power())


def known_region(provider: str, region: str) -> bool:
    return region_key(provider, region) in regions()
