"""SubmitOutcome: what `geosched submit` and `geosched up` did on the live clusters (geosched.kube.cli builds it
from geosched.kube.submit's outcome and prints what it dumps)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, WithJsonSchema

from geosched.files.decl.base import Declared, OutputDocument
from geosched.files.decl.placement import NoFitDoc, PlacementDoc


class Applied(Declared):
    api_version: str
    kind: str
    name: str
    namespace: str | None
    action: Literal["created", "configured", "unchanged"]
    resource_version: str


class Unreachable(Declared):
    cluster: str
    context: str
    reason: str


# A Kubernetes object as the API takes it: its own schema is the API's (what is declared here is what every object
# has). Written as the renderer made it, key for key (a model would reorder its keys).
KubeObject = Annotated[dict[str, Any], WithJsonSchema({
    "type": "object",
    "additionalProperties": True,
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object", "additionalProperties": True, "required": ["name"],
                     "properties": {"name": {"type": "string"}}},
    },
})]


class SubmitOutcomeDoc(OutputDocument):
    KIND: ClassVar[str] = "SubmitOutcome"
    DESCRIPTION: ClassVar[str] = "What `geosched submit` did on the live clusters."

    job: str
    status: Literal["applied", "exists", "dry-run", "no-fit"]
    cluster: str | None
    context: str | None
    zones: list[str]
    placement: PlacementDoc | None = Field(description="the Placement document (docs/schemas/Placement.schema.json)")
    nofit: NoFitDoc | None = Field(description="the NoFit document (docs/schemas/NoFit.schema.json)")
    applied: list[Applied]
    manifests: list[KubeObject] = Field(
        description="the Kubernetes objects a dry run would apply, as the API takes them")
    unreachable: list[Unreachable]
    assumptions: list[str]
