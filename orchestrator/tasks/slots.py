"""`max_parallel` for a whole tree: one pool of slots shared by every graph of a run.

A job's steps, the tasks its planner steps fork, and the tasks those fork all draw from one
pool, so at most `max_parallel` agents do work at once across the tree. An agent that waits for
the tasks it forked lends its slot to them while it waits (`lend`) and takes one back after,
so a tree deeper than the pool is wide can never deadlock.

The pool and the slot a task holds travel with the asyncio task (a context variable), as
a task's cancellation does: a graph started inside a task that holds a slot of a pool uses
that pool; a graph started outside any makes its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass


class Slots:
    """A pool of `limit` slots for agents that run at once."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._free = asyncio.Semaphore(self.limit)
        self.busy = 0
        self.peak = 0

    @classmethod
    def for_graph(cls, limit: int) -> Slots:
        """The pool of the task this is called in, or a new one of `limit` slots."""
        holding = _HOLDING.get()
        return holding.slots if holding is not None else cls(limit)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Take a slot for the block; what runs inside knows it holds one."""
        await self._take()
        holding = _Holding(self)
        token = _HOLDING.set(holding)
        try:
            yield
        finally:
            _HOLDING.reset(token)
            if holding.held:  # not when cancelled while taking a lent slot back
                self._give()

    async def _take(self) -> None:
        await self._free.acquire()
        self.busy += 1
        self.peak = max(self.peak, self.busy)

    def _give(self) -> None:
        self.busy -= 1
        self._free.release()


@dataclass
class _Holding:
    slots: Slots
    held: bool = True


_HOLDING: ContextVar[_Holding | None] = ContextVar("orchestrator_slot", default=None)


@asynccontextmanager
async def lend() -> AsyncIterator[None]:
    """Within the block, the slot the current task holds (if any) is free for others."""
    holding = _HOLDING.get()
    if holding is None or not holding.held:
        yield
        return
    holding.held = False
    holding.slots._give()
    try:
        yield
    finally:
        await holding.slots._take()
        holding.held = True
