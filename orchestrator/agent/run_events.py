"""A run's typed events as they happen, for embedders who show progress their own way.

`AgentLoop.iter(task)` gives an `AgentRun`: entered (`async with`), it starts the run; iterated,
it yields every event of the run (orchestrator/events.py) as the trace records it, the
sub-agents' included (their path in `agent`); once the events end, `result` is the run's
`RunResult`. Leaving the `async with` before the run ended (a `break`, an exception, the
consumer cancelled) cancels the run, which still ends with a complete record.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Generic

from ..events import TraceEvent
from ..trace import Trace
from .run_results import OutputT, RunResult


class _End:
    """Put on the queue when the run's task is done: no more events follow."""


_END = _End()


class AgentRun(AsyncIterator[TraceEvent], Generic[OutputT]):
    """One run's events as they happen; `result` once they ended (see the module doc).

    `run` runs the agent with the Trace it is given; `trace` is the agent's own (a Trace, a
    path, or None): a Trace is listened to for the run, a path or None is opened here (None,
    or a `NullTrace`, as a Trace in memory, so the events exist without a file).
    """

    def __init__(
        self,
        run: Callable[[Trace], Coroutine[object, object, RunResult[OutputT]]],
        trace: Trace | str | Path | None,
    ) -> None:
        self._run = run
        self._trace = trace
        self._events: asyncio.Queue[TraceEvent | _End] = asyncio.Queue()
        self._task: asyncio.Task[RunResult[OutputT]] | None = None
        self._scopes = AsyncExitStack()
        self._heard: Trace | None = None
        self.result: RunResult[OutputT] | None = None
        """The run's result, once its events have ended."""

    @property
    def skipped(self) -> int:
        """Events that were no event of a known kind and shape, so not yielded (none, unless
        a tool emitted some): the trace's count (`Trace.skipped`)."""
        return self._heard.skipped if self._heard is not None else 0

    async def __aenter__(self) -> AgentRun[OutputT]:
        loop = asyncio.get_running_loop()

        def hear(event: TraceEvent) -> None:  # the trace may be written from a tool's thread
            loop.call_soon_threadsafe(self._events.put_nowait, event)

        given = self._trace
        if isinstance(given, Trace) and given.recording:
            trace = given
            self._scopes.enter_context(trace.listening(hear))
        else:
            path = given if isinstance(given, str | Path) else None
            trace = self._scopes.enter_context(Trace(path, listeners=[hear]))
        self._heard = trace
        self._task = asyncio.create_task(self._run(trace), name="agent-run")
        self._task.add_done_callback(lambda _: loop.call_soon(self._events.put_nowait, _END))
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            task = self._task
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait([task])  # its record completes before we go on
            if task is not None and not task.cancelled() and task.exception() is None:
                self.result = task.result()
        finally:
            await self._scopes.aclose()

    def __aiter__(self) -> AgentRun[OutputT]:
        return self

    async def __anext__(self) -> TraceEvent:
        if self._task is None:
            raise RuntimeError("enter the run first: `async with agent.iter(task) as run:`")
        item = await self._events.get()
        if isinstance(item, _End):
            self._events.put_nowait(_END)  # iterating again ends at once
            self.result = self._task.result()  # the run's own error, if it raised
            raise StopAsyncIteration
        return item
