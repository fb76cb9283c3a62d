"""Shipped data (see SOURCES.md)."""
