"""Inventory: machines geosched did not launch, reached over SSH (the format in geosched/files/inventory.py, which
reads it through this declaration and then checks what spans nodes: unique names, jump hosts and their chains).
A node that declares its GPUs joins the fleet: those keys are typed as a Fleet node's (geosched.files.decl.fleet)
and read again by FleetDoc, which knows the regions and the catalog."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, WithJsonSchema

from geosched.files.decl.base import Declared, Document, IsList, Refused, Text, integer, number
from geosched.files.decl.fleet import Labels, RegionDecl

DEFAULT_PROVIDER = "onprem"
# A host key line: key type and base64 blob, optionally a comment.
HOST_KEY = r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-\S+) [A-Za-z0-9+/=]+( .*)?$"
_HOST_KEY_RE = re.compile(HOST_KEY)


def _host_key(value: str) -> str:
    if not _HOST_KEY_RE.match(value.strip()):
        raise Refused("expected a public host key line such as 'ssh-ed25519 AAAA...'")
    return value.strip()


class InventoryNode(Declared):
    """One machine and how to reach it; with `gpu` or `gpus` it joins the fleet."""

    name: Text
    address: Text
    port: int = integer(1, 65535, default=22)
    user: Text = "root"
    key: Text | None = Field(default=None, description="private key file (relative: to the inventory's folder); "
                             "default: the SSH agent and default keys")
    host_key: Annotated[Text, AfterValidator(_host_key), WithJsonSchema({"type": "string", "pattern": HOST_KEY})] \
        | None = Field(default=None, description="the node's public host key, pinned")
    proxy_jump: Text | None = Field(default=None, description="another inventory node, or [user@]host[:port] "
                                    "(geosched/files/jumpspec.py); no loops, at most 16 hops")
    zone: Text
    region: Text
    provider: Text = DEFAULT_PROVIDER
    gpu: Text | None = None
    gpus: int | None = integer(1, default=None)
    gpus_free: int | None = integer(0, default=None)
    cluster: Text | None = None
    instance_type: Text | None = None
    price_ondemand: float | None = number(0.0, default=None, description="$/h of the whole node; default for owned "
                                          "machines: amortised purchase plus power per GPU model")
    labels: Labels | None = None


class InventoryDoc(Document):
    KIND: ClassVar[str] = "Inventory"
    DESCRIPTION: ClassVar[str] = (
        "Machines geosched did not launch, reached over SSH (`--inventory`, `probe run`, the ssh provider); those "
        "with GPUs join the fleet."
    )

    regions: Annotated[list[RegionDecl], IsList] | None = Field(
        default=None, description="regions not in the shipped data (an on-prem site)")
    nodes: Annotated[list[InventoryNode], IsList]
