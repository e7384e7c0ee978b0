"""A run's typed events as they happen, for embedders who show progress their own way.

`AgentLoop.iter(task, **settings)` gives an `AgentRun`: entered (`async with`), it starts the
run; iterated, it yields every event of the run (orchestrator/events.py) as the trace records
it, the sub-agents' included (their path in `agent`); once the events end, `result` is the
run's `RunResult`. Leaving the `async with` before the run ended (a `break`, an exception, the
consumer cancelled) stops the run, which ends `cancelled` with a complete record, its result
on `result` all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Generic

from ..events import TraceEvent
from ..trace import Trace
from .run_results import OutputT, RunResult


class _End:
    """Put on the queue when the run's task is done: no more events follow."""


_END = _End()

Attach = Callable[[Trace], AbstractContextManager[object]]
"""How the run lets its events be heard: called with the run's trace as it opens it."""


class AgentRun(AsyncIterator[TraceEvent], Generic[OutputT]):
    """One run's events as they happen; `result` once they ended (see the module doc).

    `run` runs the agent: it is given `attach`, to call with the run's trace (a trace in
    memory when the run has none); `stop` stops it (a cancel handle's `cancel`: the run then
    ends `cancelled` and returns) when the `async with` is left early.
    """

    def __init__(
        self,
        run: Callable[..., Coroutine[object, object, RunResult[OutputT]]],
        stop: Callable[[], None],
    ) -> None:
        self._run = run
        self._stop = stop
        self._events: asyncio.Queue[TraceEvent | _End] = asyncio.Queue()
        self._task: asyncio.Task[RunResult[OutputT]] | None = None
        self._heard: Trace | None = None
        self.result: RunResult[OutputT] | None = None
        """The run's result, once its events have ended (or the run was left early)."""

    @property
    def skipped(self) -> int:
        """Events that were no event of a known kind and shape, so not yielded (none, unless
        a tool emitted some): the trace's count (`Trace.skipped`)."""
        return self._heard.skipped if self._heard is not None else 0

    @contextmanager
    def _attach(self, trace: Trace) -> Iterator[None]:
        loop = asyncio.get_running_loop()

        def hear(event: TraceEvent) -> None:  # the trace may be written from a tool's thread
            loop.call_soon_threadsafe(self._events.put_nowait, event)

        self._heard = trace
        with trace.listening(hear):
            yield

    async def __aenter__(self) -> AgentRun[OutputT]:
        loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(attach=self._attach), name="agent-run")
        self._task.add_done_callback(lambda _: loop.call_soon(self._events.put_nowait, _END))
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            self._stop()  # the run ends `cancelled` and returns its result
            await asyncio.wait([task])  # its record completes before we go on
        # The run's own error is raised by iterating, not by leaving.
        if not task.cancelled() and task.exception() is None:
            self.result = task.result()

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
