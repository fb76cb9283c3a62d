"""The `pods:` options of a ClusterConfig's cluster and of a compact Job: what its worker pods ask for beyond GPUs.

The shape and the checks of one key each are declared here; the checks that need the Kubernetes vocabulary (a
quantity's parser, GPUDirect's NICs per stack) are added by geosched.kube.podoptions, which reads and writes the
options through its subclass of this model and holds their meaning and defaults per cloud. Each refusal keeps the
words of the hand-written reader it replaces (`repr` of the value), as tests/kube/test_kube_podoptions.py and
test_kube_gpudirect.py check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, WithJsonSchema, model_validator

from geosched.files.decl.base import Declared, Refused, _untitled

AUTO = "auto"
STACKS = ("tcpx", "tcpxo")  # geosched.kube.gpudirect.STACKS' keys (tests/kube/test_kube_gpudirect.py checks they are)
# A GKE Network object's name (metadata.name, an RFC 1123 label as the interfaces annotation refers to it).
NETWORK_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"


def _efa(value: Any) -> Any:
    if value != AUTO and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise Refused(f"expected auto or a count of EFA devices, got {value!r}")
    return value


def _flag(value: Any) -> Any:
    if not isinstance(value, bool):
        raise Refused(f"expected true or false, got {value!r}")
    return value


def _shm(value: Any) -> Any:
    if value not in ("memory", "none"):
        raise Refused(f"expected memory or none, got {value!r}")
    return value


def _priority(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        raise Refused(f"expected a PriorityClass name, got {value!r}")
    return value


def _stack(value: Any) -> Any:
    # A str first: `gpudirect: [tcpx]` or a mapping is unhashable.
    if not isinstance(value, str) or value not in STACKS:
        raise Refused(f"expected tcpx or tcpxo, got {value!r}")
    return value


_QUANTITY = {"anyOf": [{"type": "string", "minLength": 1}, {"type": "number", "exclusiveMinimum": 0}],
             "description": "a Kubernetes quantity above 0 (90, 500m, 64Gi)"}
# Checked by geosched.kube.podoptions (Kubernetes' quantity grammar); str() of a number as the hand reader kept it.
Quantity = Annotated[str | None, WithJsonSchema(_QUANTITY)]


class PodOptionsDecl(Declared):
    """The keys in the order they are written (geosched.kube.podoptions.to_dict: the inputs digest holds them)."""

    efa: Annotated[int | str | None, BeforeValidator(_efa), WithJsonSchema(
        {"anyOf": [{"const": AUTO}, {"type": "integer", "minimum": 0}],
         "description": "vpc.amazonaws.com/efa per worker: auto (the worker's share of the machine's), or a count"})
    ] = None
    hugepages_2mi: Quantity = None
    host_network: Annotated[bool, BeforeValidator(_flag)] = False
    shm: Annotated[Literal["memory", "none"], BeforeValidator(_shm)] = "memory"
    shm_size: Quantity = None
    cpu: Quantity = None
    memory: Quantity = None
    priority_class: Annotated[str | None, BeforeValidator(_priority),
                              WithJsonSchema({"type": "string", "minLength": 1})] = None
    gpudirect: Annotated[str | None, BeforeValidator(_stack), WithJsonSchema({"enum": list(STACKS)})] = None
    # These two are checked with the stack they belong to (geosched.kube.podoptions: its NICs, its refusals' order).
    gpudirect_networks: Annotated[Any, WithJsonSchema(
        {"type": "array", "items": {"type": "string", "pattern": f"^{NETWORK_NAME}$"}, "uniqueItems": True,
         "minItems": 4, "maxItems": 8, "description": "the GPU NIC Network objects: 4 (tcpx) or 8 (tcpxo)"})
    ] = None
    gpudirect_image: Annotated[Any, WithJsonSchema({"type": "string", "minLength": 1})] = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_a_value_here(cls, data: Any) -> Any:
        # Runs before Declared's own (which reads a null as a key not given): `shm:` or `host_network:` with no
        # value was refused by the hand-written reader, their absence meaning a default, not null; still refused.
        if isinstance(data, Mapping):
            for key, check in (("shm", _shm), ("host_network", _flag)):
                if key in data and data[key] is None:
                    try:
                        check(None)
                    except Refused as refused:
                        raise Refused(refused.reason, key) from None
        return data


def schema(description: str) -> dict[str, Any]:
    """The `pods:` mapping's JSON Schema, for the kinds that hold one (ClusterConfig's clusters, Job)."""
    body = _untitled(PodOptionsDecl.model_json_schema(by_alias=True, mode="validation"))
    body.pop("title", None)
    return {**body, "description": description}
