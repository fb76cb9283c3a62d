"""The command line: the typer app, its entry point, the verbs that belong to no edge, the docs generator. What lives
here, and what may import it: README.md."""
