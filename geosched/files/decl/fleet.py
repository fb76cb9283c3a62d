"""Fleet: regions > zones > nodes, with the regions and GPU power a file declares beyond the shipped catalog."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import BeforeValidator, Field, PrivateAttr, WithJsonSchema, model_validator

from geosched.core import catalog
from geosched.core.models import Fleet, GpuPower, Node, NodeState, Region, Zone, region_key
from geosched.files.decl.base import Declared, Document, IsList, Refused, Strings, Text, integer, number, one_of
from geosched.files.fields import MAX_NUMBER, describe


class RegionDecl(Declared):
    """A region the catalog does not ship (an on-prem site): its grid intensity and PUE."""

    provider: Text
    name: Text
    grid_gco2e_per_kwh: float = number(0.0)
    pue: float = number(1.0)
    cfe_fraction: float | None = number(0.0, default=None)

    def region(self) -> Region:
        return Region(self.provider, self.name, self.grid_gco2e_per_kwh, self.pue, self.cfe_fraction)


class PowerDecl(Declared):
    """A GPU model's power draw, for a model the catalog does not ship (or to correct it)."""

    gpu: Text
    idle_watts: float = number(0.0)
    max_watts: float = number(None, json_schema_extra={"minimum": 0})  # at least idle_watts, checked below

    @model_validator(mode="after")
    def _peak_not_below_idle(self) -> Self:
        if self.max_watts < self.idle_watts:
            raise Refused(f"must be >= {self.idle_watts:g}, got {self.max_watts:g}", "max_watts")
        return self


def _labels(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise Refused(f"expected a mapping, got {describe(value)}")
    for k, v in value.items():
        if not isinstance(k, str):
            raise Refused(f"expected string keys, got {describe(k)}")
        if (
            not isinstance(v, str | int | float)
            or isinstance(v, bool)
            or (not isinstance(v, str) and not abs(v) <= MAX_NUMBER)
        ):
            raise Refused("expected a string value", k)
    return {k: str(v) for k, v in value.items()}


Labels = Annotated[
    dict[str, str],
    BeforeValidator(_labels),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": ["string", "number"]}}),
]
"""Node labels: string values (a number is written as its text)."""

StateName = Literal["ready", "provisioning", "not-ready", "terminated"]
STATES = {s.value: s for s in NodeState}  # a lookup: NodeState(value) costs more than the rest of a node
assert set(get_args(StateName)) == set(STATES)


class NodeDecl(Declared):
    """One machine. An instance type the catalog knows for the zone gives the GPU model, count and prices that are
    not written."""

    name: Text
    provider: Text
    region: Text
    zone: Text
    instance_type: Text = "custom"
    gpu: Text | None = None
    gpus: int | None = integer(1, default=None)
    gpus_free: int | None = integer(0, default=None)  # at most gpus; absent: all of them
    price_ondemand: float | None = number(0.0, default=None)
    price_spot: float | None = number(0.0, default=None)
    cluster: Text | None = None
    addresses: Strings | None = None
    labels: Labels | None = None
    provider_id: Text | None = None
    state: Annotated[StateName, one_of(StateName)] = "ready"

    def node(self, known_gpus: set[str]) -> Node:
        """The node, its omissions filled from the catalog's offering; a Refused names the field at fault."""
        offer = catalog.offering_index().get((self.provider, self.instance_type, self.zone))
        gpu = self.gpu or (offer.gpu if offer else None)
        if gpu is None:
            raise Refused("required (the instance type is not in the catalog for this zone)", "gpu")
        if gpu not in known_gpus:
            raise Refused(f"unknown GPU model {gpu!r} (declare its power under gpu_power:)", "gpu")
        gpus = self.gpus if self.gpus is not None else offer.gpus if offer else None
        if gpus is None:
            raise Refused("required", "gpus")
        free = gpus if self.gpus_free is None else self.gpus_free
        if free > gpus:
            raise Refused(f"must be <= gpus ({gpus}), got {free}", "gpus_free")
        return Node(
            name=self.name,
            provider=self.provider,
            region=self.region,
            zone=self.zone,
            instance_type=self.instance_type,
            gpu=gpu,
            gpus=gpus,
            gpus_free=free,
            price_ondemand=self.price_ondemand
            if self.price_ondemand is not None
            else (offer.price_ondemand if offer else None),
            price_spot=self.price_spot if self.price_spot is not None else (offer.price_spot if offer else None),
            cluster=self.cluster,
            addresses=tuple(self.addresses or ()),
            labels=dict(self.labels or {}),
            state=STATES[self.state],
            provider_id=self.provider_id,
        )

    @classmethod
    def of(cls, n: Node) -> NodeDecl:
        return cls.build(
            name=n.name,
            provider=n.provider,
            region=n.region,
            zone=n.zone,
            instance_type=n.instance_type,
            gpu=n.gpu,
            gpus=n.gpus,
            gpus_free=n.gpus_free,
            price_ondemand=n.price_ondemand,
            price_spot=n.price_spot,
            cluster=n.cluster,
            addresses=list(n.addresses) or None,
            labels=dict(sorted(n.labels.items())) or None,
            provider_id=n.provider_id,
            state=n.state.value,
        )


class NotWholeDecl(Declared):
    """A GPU node of a cluster left out of the fleet because its nvidia.com/gpu are shared replicas or MIG slices
    (`snapshot export --from-clusters` writes them): its labels, so a gang rendered from the snapshot is kept off it."""

    cluster: Text
    labels: Labels


class FleetDoc(Document):
    KIND: ClassVar[str] = "Fleet"
    DESCRIPTION: ClassVar[str] = (
        "Regions > zones > nodes to place on (`geosched place --fleet`, snapshots, the store): the nodes, and the "
        "regions and GPU power the file declares beyond the shipped catalog."
    )

    regions: Annotated[list[RegionDecl], IsList] = Field(default_factory=list)
    gpu_power: Annotated[list[PowerDecl], IsList] = Field(default_factory=list)
    nodes: Annotated[list[NodeDecl], IsList]
    not_whole: Annotated[list[NotWholeDecl], IsList] = Field(default_factory=list)
    # The fleet the document stands for, built while it is validated (its faults are the document's).
    _fleet: Fleet | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _nodes_of_known_regions_zones_and_gpus(self) -> Self:
        self._fleet = self._build()
        return self

    def _build(self) -> Fleet:
        regions = dict(catalog.regions()) | {r.region().key: r.region() for r in self.regions}
        power = dict(catalog.gpu_power()) | {p.gpu: GpuPower(p.gpu, p.idle_watts, p.max_watts) for p in self.gpu_power}
        known_gpus = catalog.gpu_models() | set(power)
        nodes = []
        for i, decl in enumerate(self.nodes):
            if region_key(decl.provider, decl.region) not in regions:
                raise Refused(
                    f"unknown region {decl.provider}:{decl.region} (declare it under regions: with its "
                    "grid_gco2e_per_kwh and pue)",
                    "nodes",
                    i,
                    "region",
                )
            try:
                nodes.append(decl.node(known_gpus))
            except Refused as exc:
                raise Refused(exc.reason, "nodes", i, *exc.at) from None
        zones: dict[str, Zone] = {}
        names: set[str] = set()
        for i, node in enumerate(nodes):
            if node.name in names:
                raise Refused(f"duplicate node name {node.name!r}", "nodes", i, "name")
            names.add(node.name)
            zone = Zone(node.zone, node.provider, node.region)
            if zones.setdefault(node.zone, zone) != zone:
                other = zones[node.zone]
                raise Refused(
                    f"zone {node.zone!r} is in {other.region_key} elsewhere in this file, here in {zone.region_key}",
                    "nodes",
                    i,
                    "zone",
                )
        used = {z.region_key for z in zones.values()}
        not_whole: dict[str, tuple[dict[str, str], ...]] = {}
        for left_out in self.not_whole or ():
            not_whole[left_out.cluster] = (*not_whole.get(left_out.cluster, ()), dict(left_out.labels))
        return Fleet(
            regions={k: v for k, v in regions.items() if k in used}, zones=zones, nodes=tuple(nodes), gpu_power=power,
            not_whole=not_whole,
        )

    def fleet(self) -> Fleet:
        return self._fleet if self._fleet is not None else self._build()

    @classmethod
    def of(cls, fleet: Fleet) -> FleetDoc:
        """The document of a fleet: its nodes, and the regions and GPU power it holds beyond the shipped catalog."""
        shipped, shipped_power = catalog.regions(), catalog.gpu_power()
        regions = [
            # cfe_fraction is not written: documents written before it existed keep their digest.
            RegionDecl.build(provider=r.provider, name=r.name, grid_gco2e_per_kwh=r.grid_gco2e_per_kwh, pue=r.pue)
            for key, r in sorted(fleet.regions.items())
            if shipped.get(key) != r
        ]
        power = [
            PowerDecl.build(gpu=p.gpu, idle_watts=p.idle_watts, max_watts=p.max_watts)
            for name, p in sorted(fleet.gpu_power.items())
            if shipped_power.get(name) != p
        ]
        # Written only when there are any: snapshots without such nodes keep their bytes (and GitOps digests).
        not_whole = [NotWholeDecl.build(cluster=cluster, labels=dict(sorted(labels.items())))
                     for cluster, nodes in sorted(fleet.not_whole.items()) for labels in nodes]
        return cls.build(regions=regions or None, gpu_power=power or None, nodes=[NodeDecl.of(n) for n in fleet.nodes],
                         not_whole=not_whole or None)
