"""The MCP servers of one run: one pool, its own event loop thread, closed when the run ends.

A run (`Agent.run`, a job) opens a `server_scope`; every agent of the run, sub-agents
included, finds the same pool through a context variable, so one server process serves them
all. Nothing starts when the scope opens: the pool's thread and each server start on the first
load that needs them. The servers live on the pool's own event loop, so code that must stay
synchronous (preloading a sub-agent's skills while it is built) can wait for a server too,
and a cancelled run (Ctrl-C) cannot cut a server's shutdown short: the scope's exit stops
every server and waits for them, and an `atexit` hook stops any pool a crash left open.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from .connection import Connection

T = TypeVar("T")
CLOSE_TIMEOUT = 20.0

_CURRENT: ContextVar[ServerPool | None] = ContextVar("orchestrator_mcp_pool", default=None)


class ServerPool:
    """Connections by key (the declaring skill and the server's name), on one event loop.

    `environ` is where `${VAR}` in the servers' configs comes from (the process environment
    by default; a job's, `.env` files included, for a job).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.connections: dict[tuple[str, str], Connection] = {}
        self.cache: dict[str, Any] = {}
        """Per-run results keyed by skill (its tools), kept by the callers."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing: concurrent.futures.Future[None] | None = None

    @property
    def started(self) -> bool:
        return self._loop is not None

    def connection(self, skill: str, name: str, factory: Any) -> Connection:
        """The run's connection to one server, made by `factory()` the first time."""
        with self._lock:
            key = (skill, name)
            if key not in self.connections:
                self.connections[key] = factory()
            return self.connections[key]

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the pool's loop (started on first use)."""
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(coro, loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` run on the pool's loop; cancelling this cancels it there."""
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """`coro` on the pool's loop, waited for from synchronous code (not the pool's loop)."""
        return self.submit(coro).result(timeout)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closing is not None:
                raise RuntimeError("the run's MCP servers were shut down")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="mcp-servers", daemon=True
                )
                self._thread.start()
                self._loop = loop
                atexit.register(self.close)
            return self._loop

    async def _stop_all(self) -> None:
        connections = list(self.connections.values())
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

    def _begin_close(self) -> concurrent.futures.Future[None] | None:
        with self._lock:
            if self._loop is None:
                return None
            if self._closing is None:
                self._closing = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
                self._closing.add_done_callback(lambda _: self._end_loop())
            return self._closing

    def _end_loop(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def close(self) -> None:
        """Stop every server of the run and the pool's thread; waits (bounded)."""
        closing = self._begin_close()
        if closing is None:
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, Exception):
            closing.result(CLOSE_TIMEOUT)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_TIMEOUT)
        atexit.unregister(self.close)

    async def aclose(self) -> None:
        """`close` from async code; a cancellation meanwhile still waits for the servers."""
        closing = self._begin_close()
        if closing is None:
            return
        try:
            await asyncio.shield(asyncio.wrap_future(closing))
        except asyncio.CancelledError:
            self.close()
            raise
        self.close()


def current_pool() -> ServerPool | None:
    """The pool of the run this code is part of, if any."""
    return _CURRENT.get()


@contextlib.asynccontextmanager
async def server_scope(environ: Mapping[str, str] | None = None) -> AsyncIterator[ServerPool]:
    """The run's pool: the enclosing run's, or a new one closed (servers and all) on exit."""
    found = _CURRENT.get()
    if found is not None:
        yield found
        return
    pool = ServerPool(environ)
    token = _CURRENT.set(pool)
    try:
        yield pool
    finally:
        _CURRENT.reset(token)
        await pool.aclose()


@contextlib.contextmanager
def sync_server_scope() -> Iterator[ServerPool]:
    """`server_scope` for synchronous code (`skills show --connect`)."""
    found = _CURRENT.get()
    if found is not None:
        yield found
        return
    pool = ServerPool()
    token = _CURRENT.set(pool)
    try:
        yield pool
    finally:
        _CURRENT.reset(token)
        pool.close()
