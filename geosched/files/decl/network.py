"""NetworkView: measured links between zones and between nodes (`place --network`, snapshots, probe exports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

from pydantic import Field, ValidationInfo, model_validator

from geosched.core.models import Fleet, LinkStats, NetworkView, pair_key
from geosched.files.decl.base import Declared, Document, IsList, Refused, Text, integer, number


class Link(Declared):
    """One measured pair: links are symmetric, `a`-`b` is `b`-`a` too."""

    a: Text
    b: Text
    rtt_p50_ms: float = number(0.0)
    # At least rtt_p50_ms (checked by the view, so a value under it is refused naming that bound); absent: rtt_p50_ms.
    rtt_p95_ms: float | None = number(None, default=None, json_schema_extra={"minimum": 0})
    loss: float = number(0.0, 1.0, default=0.0)
    throughput_gbps: float = number(0.0, exclusive_minimum=True)
    age_s: float = number(0.0, default=0.0)
    samples: int = integer(0, default=1)

    def stats(self) -> LinkStats:
        return LinkStats(
            rtt_p50_ms=self.rtt_p50_ms,
            rtt_p95_ms=self.rtt_p50_ms if self.rtt_p95_ms is None else self.rtt_p95_ms,
            loss=self.loss,
            throughput_gbps=self.throughput_gbps,
            age_s=self.age_s,
            samples=self.samples,
        )


class NetworkDoc(Document):
    KIND: ClassVar[str] = "NetworkView"
    DESCRIPTION: ClassVar[str] = (
        "Measured links between zones and between nodes (`geosched place --network`, "
        "snapshots, `probe run --snapshot`)."
    )

    stale_after_s: float = number(0.0, default=3600.0)
    zones: Annotated[list[Link], IsList] = Field(default_factory=list)
    nodes: Annotated[list[Link], IsList] = Field(default_factory=list)

    @model_validator(mode="after")
    def _links_of_the_fleet_once_each(self, info: ValidationInfo) -> Self:
        fleet: Fleet | None = (info.context or {}).get("fleet")
        zones, nodes = (set(fleet.zones), set(fleet.by_name)) if fleet is not None else (None, None)
        for key, known, what in (("zones", zones, "zone"), ("nodes", nodes, "node")):
            seen: set[tuple[str, str]] = set()
            for i, link in enumerate(getattr(self, key)):
                # Checked here, not by each link: one Python call per document, not per link.
                if link.rtt_p95_ms is not None and link.rtt_p95_ms < link.rtt_p50_ms:
                    raise Refused(f"must be >= {link.rtt_p50_ms:g}, got {link.rtt_p95_ms:g}", key, i, "rtt_p95_ms")
                for end in ("a", "b"):
                    if known is not None and getattr(link, end) not in known:
                        raise Refused(f"unknown {what} {getattr(link, end)!r} (not in the fleet)", key, i, end)
                if pair_key(link.a, link.b) in seen:
                    # Links are symmetric (keyed a-b and b-a alike): a second entry silently replaced the first,
                    # so the placement read whichever came last, 1 ms or 500 ms.
                    raise Refused(
                        f"a second link between {link.a!r} and {link.b!r} (links hold both directions; "
                        "give each pair once)",
                        key,
                        i,
                        "b",
                    )
                seen.add(pair_key(link.a, link.b))
        return self

    def view(self) -> NetworkView:
        return NetworkView(
            zone_links={pair_key(x.a, x.b): x.stats() for x in self.zones},
            node_links={pair_key(x.a, x.b): x.stats() for x in self.nodes},
            stale_after_s=self.stale_after_s,
        )

    @classmethod
    def of(cls, view: NetworkView) -> NetworkDoc:
        """The document of a view, built without validation: the view's values are written as they are."""

        def rows(links: Mapping[tuple[str, str], LinkStats] | Any) -> list[Link]:
            return [
                Link.build(
                    a=a,
                    b=b,
                    rtt_p50_ms=s.rtt_p50_ms,
                    rtt_p95_ms=s.rtt_p95_ms,
                    loss=s.loss,
                    throughput_gbps=s.throughput_gbps,
                    age_s=s.age_s,
                    samples=s.samples,
                )
                for (a, b), s in sorted(links.items())
            ]

        return cls.build(stale_after_s=view.stale_after_s, zones=rows(view.zone_links), nodes=rows(view.node_links))
