"""Exclusive use of several resources at once (nodes, zone-pair links) without hold-and-wait."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection


class ResourceLocks:
    """`async with locks.hold({"node:a", "node:b", "link:eu|us"})` waits until all are free and takes them
    together, so two holders can never each wait for what the other has (no deadlock, whatever the order)."""

    def __init__(self) -> None:
        self._busy: set[str] = set()
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, resources: Collection[str]) -> AsyncIterator[None]:
        wanted = set(resources)
        async with self._changed:
            await self._changed.wait_for(lambda: not (wanted & self._busy))
            self._busy |= wanted
        try:
            yield
        finally:
            # Released before any await, so a second cancellation cannot leave the resources taken.
            self._busy -= wanted
            await asyncio.shield(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    @property
    def busy(self) -> frozenset[str]:
        return frozenset(self._busy)
