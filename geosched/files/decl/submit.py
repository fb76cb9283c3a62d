"""SubmitOutcome: what `geosched submit` and `geosched up` did on the live clusters (geosched.kube.cli builds it).
Declared for the shape and the schema."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from geosched.files.decl.base import Declared, OutputDocument


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


class ObjectName(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str


class KubeObject(BaseModel):
    """A Kubernetes object as the API takes it: its own schema is the API's (what is declared here is what every
    object has)."""

    model_config = ConfigDict(extra="allow", serialize_by_alias=True)

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: ObjectName


class SubmitOutcomeDoc(OutputDocument):
    KIND: ClassVar[str] = "SubmitOutcome"
    DESCRIPTION: ClassVar[str] = "What `geosched submit` did on the live clusters."

    job: str
    status: Literal["applied", "exists", "dry-run", "no-fit"]
    cluster: str | None
    context: str | None
    zones: list[str]
    placement: dict[str, Any] | None = Field(description="the Placement document (docs/schemas/Placement.schema.json)")
    nofit: dict[str, Any] | None = Field(description="the NoFit document (docs/schemas/NoFit.schema.json)")
    applied: list[Applied]
    manifests: list[KubeObject] = Field(
        description="the Kubernetes objects a dry run would apply, as the API takes them")
    unreachable: list[Unreachable]
    assumptions: list[str]
