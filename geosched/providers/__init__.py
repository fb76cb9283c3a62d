"""Cloud and inventory providers (see README.md)."""
