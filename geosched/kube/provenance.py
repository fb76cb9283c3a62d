"""Why a gang went where it went, written on its objects under geosched's own annotation prefix.

The time is a parameter, never read from a clock, so the same inputs render byte-identical manifests. The
digest covers every input that shapes the output except that time; equal digests mean the same decision.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from geosched.core.models import Placement
from geosched.files.documents import score_to_dict
from geosched.kube.keys import PREFIX

DIGEST = PREFIX + "inputs-sha256"
CLUSTER = PREFIX + "cluster"  # on the job object alone: where it was placed


def inputs_digest(inputs: Mapping[str, Any]) -> str:
    # Canonical JSON: sorted keys, no whitespace; non-JSON scalars a YAML file may hold (dates) as text.
    try:
        text = _canonical(inputs)
    except TypeError:  # keys that do not sort together (a YAML mapping may hold 1 and "a"): sorted as text
        text = _canonical(_text_keys(inputs))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(inputs: Any) -> str:
    return json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _text_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _text_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_text_keys(v) for v in value]
    return value


def timestamp(now: datetime) -> str:
    if now.tzinfo is None:
        raise ValueError("the render time must be timezone-aware (a naive time means a different instant per host)")
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance_annotations(placement: Placement, cluster: str, digest: str, now: datetime) -> dict[str, str]:
    score = score_to_dict(placement.score)
    terms = {k: score[k] for k in ("total", "network", "cost", "carbon")}
    weights = {"network": placement.weights.network, "cost": placement.weights.cost,
               "carbon": placement.weights.carbon}
    return {
        CLUSTER: cluster,
        PREFIX + "zones": ",".join(placement.zones),
        PREFIX + "regions": ",".join(placement.regions),
        PREFIX + "policy": placement.policy,
        PREFIX + "score": json.dumps(terms, sort_keys=True, separators=(",", ":")),
        PREFIX + "weights": json.dumps(weights, sort_keys=True, separators=(",", ":")),
        PREFIX + "usd-per-hour": f"{placement.score.usd_per_hour:.4f}",
        PREFIX + "gco2e-per-hour": f"{placement.score.gco2e_per_hour:.2f}",
        PREFIX + "assignments": ",".join(f"{a.node}={a.workers}" for a in placement.assignments),
        PREFIX + "placed-at": timestamp(now),
        DIGEST: digest,
    }
