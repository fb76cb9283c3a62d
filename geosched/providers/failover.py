"""Failover decisions: the one place that maps an error class to what happens next. Pure.

    error class        in place?   blocks                                   remembered
    CapacityError      no          the offering in that zone (type, market)   TTL capacity
    QuotaError         no          the region (market), or every region        TTL quota
                                   of the provider when the limit is global
    UnsupportedError   no          the type in that zone (or region)           TTL unsupported
    RateError          yes         - (after the retries run out: the zone)     this run
    TransientError     yes         - (after the retries run out: the zone)     this run
    AuthError          no          the whole provider                          this run
    StallError         no          the zone                                    this run

Only `geosched.providers.base` error classes are seen here, never an SDK type.
"""

from __future__ import annotations

from dataclasses import dataclass

from geosched.providers.base import (
    AuthError,
    CapacityError,
    ProviderError,
    QuotaError,
    RateError,
    StallError,
    TransientError,
    UnsupportedError,
)
from geosched.providers.plan import Block, Candidate


@dataclass(frozen=True, slots=True)
class Ttls:
    """How long a refusal is remembered. Capacity comes back within minutes to hours; quota needs a
    support ticket; an unsupported type in a zone does not change within a day."""

    capacity_s: float = 15 * 60.0
    quota_s: float = 60 * 60.0
    unsupported_s: float = 24 * 3600.0


def retry_in_place(error: ProviderError) -> bool:
    return isinstance(error, RateError | TransientError)


def blocks_for(error: ProviderError, c: Candidate, nodes: int, ttls: Ttls = Ttls()) -> tuple[Block, ...]:
    """What this failure of candidate `c` for a gang of `nodes` rules out, for this run or for a TTL. Only a
    capacity refusal depends on the gang's size; quota, support and credentials do not (min_nodes 1)."""
    reason = error.message if not error.code else f"{error.code}: {error.message}"
    kind = error.kind
    if isinstance(error, CapacityError):
        return (Block(c.provider, c.region, c.zone, c.instance_type, c.pricing, reason, kind, ttls.capacity_s,
                      min_nodes=nodes),)
    if isinstance(error, QuotaError):
        if error.all_regions:
            return (Block(c.provider, None, None, None, None, reason, kind, ttls.quota_s),)
        return (Block(c.provider, c.region, None, None, c.pricing, reason, kind, ttls.quota_s),)
    if isinstance(error, UnsupportedError):
        zone = None if error.region_wide else c.zone
        return (Block(c.provider, c.region, zone, c.instance_type, None, reason, kind, ttls.unsupported_s),)
    if isinstance(error, AuthError):
        return (Block(c.provider, None, None, None, None, reason, kind, None),)
    if isinstance(error, StallError):
        return (Block(c.provider, c.region, c.zone, None, None, reason, kind, None),)
    # Rate and transient errors that survived their retries: leave this zone for this run only.
    return (Block(c.provider, c.region, c.zone, None, None, reason, kind, None),)


def first_block(blocks: list[Block], c: Candidate, nodes: int) -> Block | None:
    return next((b for b in blocks if b.covers(c, nodes)), None)
