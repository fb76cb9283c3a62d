"""`probe run` without --inventory: the machines the store knows as probe targets. Glue between two edges (the
providers, which journal the machines geosched launched and read the host keys their clouds report, and the probes,
which pin those keys), so it lives in the CLI layer that may import both; `geosched.probes.cli.make_app` is handed
it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geosched.files.inventory import ProbeTargets
    from geosched.store.db import Store


def store_targets(store: Store, gang: str | None, key: Path | None) -> ProbeTargets:
    """The store's machines as probe targets, reached as `provision` set them up (GEOSCHED_SSH_USER). Machines
    geosched launched get their host keys pinned as their cloud reports them (EC2 console output, GCE guest
    attributes), so they are verified without trusting the network on first use."""
    from geosched import settings
    from geosched.console import render
    from geosched.providers import journal, registry
    from geosched.providers.config import from_env
    from geosched.providers.lifecycle import probe_targets, reported_host_keys
    found = probe_targets(store, gang, settings.lookup(settings.SSH_USER), key)
    if not found.unpinned:
        return found
    rows = {r.name: r.provider for r in journal.instances(store, states=("launched",))}
    wanted = [n for n in found.unpinned if rows.get(n) in registry.CLOUDS]
    if not wanted:
        return found
    providers = registry.build(sorted({rows[n] for n in wanted}), from_env(settings.environ(), store.home))
    keys, errors = reported_host_keys(store, providers, wanted)
    for line in errors:
        render.err.print(line, markup=False, highlight=False, soft_wrap=True)
    import asyncssh

    from geosched.probes.hostkeys import KNOWN_HOSTS_NAME, HostKeys

    pinned = HostKeys(store.home / KNOWN_HOSTS_NAME)
    by_name = {t.name: t for t in found.probe}
    for name, lines in keys.items():
        for text in lines:
            try:
                pinned.pin(by_name[name], asyncssh.import_public_key(text))
            except (asyncssh.KeyImportError, ValueError):
                render.err.print(f"{name}: the cloud reported an unreadable host key", markup=False)
    return replace(found, unpinned=tuple(n for n in found.unpinned if n not in keys))
