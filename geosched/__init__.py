"""geosched: zone-first placement of distributed training gangs across geo-distributed GPU clusters."""

__version__ = "0.1.0"
