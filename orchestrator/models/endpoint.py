"""What every connection to one endpoint shares: the HTTP client and the count of calls in flight.

An endpoint is a base URL and a key. Models resolved separately (a planner and its sub-agents,
each resolving its own model string) still share one client and one concurrency limit, so a
wide fan-out does not trip the provider's rate limits. That needs state beyond any one model,
hence the process-wide registry below (`shared_endpoint`).
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref

import httpx


class _Gate:
    """Counts calls in flight; a call enters when fewer than its limit are in.

    Each caller brings its own limit, so two Connections to one endpoint with different
    settings still share one count. Leaving wakes every waiter to re-check: the counts are
    small and it leaves no wake-up lost to a waiter that was cancelled.
    """

    def __init__(self) -> None:
        self.active = 0
        self._waiters: list[asyncio.Future[None]] = []

    async def enter(self, limit: int) -> bool:
        """Take a place; True if the call had to wait for one."""
        waited = False
        while self.active >= limit:
            waited = True
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            try:
                await future
            finally:
                if future in self._waiters:
                    self._waiters.remove(future)
        self.active += 1
        return waited

    def leave(self) -> None:
        self.active -= 1
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


class _LoopState:
    def __init__(self) -> None:
        # No pool cap of httpx's own: the gate is the limit, and a second one would only
        # turn a wait into a PoolTimeout.
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None))
        self.gate = _Gate()


class Endpoint:
    """What every Connection to one base URL and key shares: the HTTP client and the gate.

    An httpx client and asyncio primitives belong to one event loop, so there is one of each
    per running loop (each `asyncio.run`, each test); within a loop they are shared.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.stream_refused: set[str] = set()
        """Shapes of request this endpoint answered with an empty stream; sent whole from then."""
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None or state.client.is_closed:
            # A client's connections refer to their loop, so entries of finished loops
            # (an earlier `asyncio.run`) would never be collected unless dropped here.
            for finished in [other for other in self._loops if other.is_closed()]:
                del self._loops[finished]
            state = self._loops[loop] = _LoopState()
        return state

    def client(self) -> httpx.AsyncClient:
        return self._state().client

    def gate(self) -> _Gate:
        return self._state().gate

    async def aclose(self) -> None:
        """Close this loop's client; the next call opens a new one."""
        state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.aclose()

    def __repr__(self) -> str:
        return f"Endpoint({self.base_url!r})"


_ENDPOINTS: dict[tuple[str, str], Endpoint] = {}


def shared_endpoint(base_url: str, api_key: str | None) -> Endpoint:
    """The process-wide Endpoint for this base URL and key (keys are kept only as hashes)."""
    key_id = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else ""
    return _ENDPOINTS.setdefault((base_url, key_id), Endpoint(base_url))


async def close_connections() -> None:
    """Close the HTTP clients the running event loop opened. Optional: call before the loop
    ends to release sockets at once rather than when they are collected."""
    for endpoint in list(_ENDPOINTS.values()):
        await endpoint.aclose()
