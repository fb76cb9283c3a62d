"""Every JSON Schema in docs/schemas, as written (`python -m geosched.cli.schemas docs/schemas`; the tests compare the
committed files): the list kinds' (geosched.console.lists) and every declared document's (geosched.files.decl, and
the settings declared beside their package: GitOps, clusters, scheduler, dispatcher; the GitOps tree's index, and the
gang request the provisioning journal keeps).

Here, in the CLI layer, because gathering them imports every package that declares one, the edges among them: in
geosched.files.decl it made the input layer import gitops and kube (four declared exceptions to the layering, issue
25 audit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from geosched.console.output import KINDS
from geosched.files.decl.base import Document, OutputDocument, Record
from geosched.files.decl.fleet import FleetDoc
from geosched.files.decl.inventory import InventoryDoc
from geosched.files.decl.job import JobDoc
from geosched.files.decl.network import NetworkDoc
from geosched.files.decl.placement import NoFitDoc, PlacementDoc
from geosched.files.decl.probe import ProbeRunDoc
from geosched.files.decl.provisioning import GangStatusDoc, ProvisionPlanDoc, ProvisionResultDoc
from geosched.files.decl.reports import CarbonReportDoc, CostReportDoc
from geosched.files.decl.settings import SettingsDoc
from geosched.files.decl.simulation import SimulationReportDoc
from geosched.files.decl.submit import SubmitOutcomeDoc
from geosched.gitops.config import GitOpsConfigDoc
from geosched.gitops.index import PlacementIndexDoc
from geosched.kube.config import ClusterConfigDoc
from geosched.kube.multikueue.settings import DispatcherConfigDoc
from geosched.kube.scheduler.settings import SchedulerConfigDoc
from geosched.providers.journal import GangRequestRecord

# Declared beside their package where one owns them (the GitOps, cluster, scheduler and dispatcher settings).
DECLARED: tuple[type[Document], ...] = (
    ClusterConfigDoc,
    DispatcherConfigDoc,
    FleetDoc,
    GitOpsConfigDoc,
    InventoryDoc,
    JobDoc,
    NetworkDoc,
    PlacementIndexDoc,
    SchedulerConfigDoc,
)
# What geosched prints, written through these declarations (geosched.console.output.emit_document takes one; the
# tests validate each command's output against the schema and read it back through the declaration).
WRITTEN: tuple[type[OutputDocument], ...] = (
    CarbonReportDoc, CostReportDoc, GangStatusDoc, NoFitDoc, PlacementDoc, ProbeRunDoc, ProvisionPlanDoc,
    ProvisionResultDoc, SettingsDoc, SimulationReportDoc, SubmitOutcomeDoc,
)
# What geosched keeps for itself in its store, as JSON: declared and generated all the same (read strictly).
RECORDS: tuple[type[Record], ...] = (GangRequestRecord,)


def document_schemas() -> dict[str, str]:
    """<Kind>.schema.json of every declared document."""
    schemas = [(d.KIND, d.schema_document()) for d in DECLARED] + [(d.KIND, d.schema_document()) for d in WRITTEN]
    schemas += [(d.KIND, d.schema_document()) for d in RECORDS]
    return {f"{kind}.schema.json": json.dumps(schema, indent=2) + "\n" for kind, schema in schemas}


def schema_files() -> dict[str, str]:
    """docs/schemas/<Kind>List.schema.json of every list kind and <Kind>.schema.json of every declared document."""
    from geosched.console import lists as kinds  # noqa: F401  (registers the list kinds in KINDS)

    return {**{f"{kind}.schema.json": json.dumps(spec.schema(), indent=2) + "\n" for kind, spec in KINDS.items()},
            **document_schemas()}


if __name__ == "__main__":  # python -m geosched.cli.schemas docs/schemas
    for name, text in schema_files().items():
        Path(sys.argv[1], name).write_text(text, encoding="utf-8")
