"""Network probes over SSH (see README.md)."""
