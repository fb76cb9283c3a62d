"""The store: geosched's memory (SQLite), the usage ledger, and where a command's fleet and network come from. What
lives here, and what may import it: README.md."""
