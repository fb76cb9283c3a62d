"""The JSON Schema of every declared document, as docs/schemas holds it (`python -m geosched.kinds docs/schemas`
writes them with the list kinds' schemas; the tests compare the committed files)."""

from __future__ import annotations

import json

from geosched.decl.base import Document
from geosched.decl.fleet import FleetDoc
from geosched.decl.job import JobDoc
from geosched.decl.network import NetworkDoc

DECLARED: tuple[type[Document], ...] = (FleetDoc, JobDoc, NetworkDoc)


def schema_files() -> dict[str, str]:
    return {f"{doc.KIND}.schema.json": json.dumps(doc.schema_document(), indent=2) + "\n" for doc in DECLARED}
