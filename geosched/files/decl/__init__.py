"""The declared documents: one pydantic model per document kind, which parses, serialises and writes its JSON
Schema (geosched/decl/README.md). Imported by the verbs that read or write a document, never by `geosched -h`."""
