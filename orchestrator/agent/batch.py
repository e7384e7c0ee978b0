"""Running the tool calls of one assistant turn.

Invariants kept here: every call gets exactly one result, carrying its call id, in the order
the model gave the calls; failures become error results, never exceptions; calls run
concurrently up to a limit, and an `exclusive` tool runs alone, as a barrier. If the batch is
cancelled, `finish_cancelled` gives calls that had started an `aborted` result and calls that
never started a `skipped` one. Every call is admitted first (approval.py: the run's guards and
a person's approval where the permissions ask for it); a call waiting for approval has not
started.

Results are handed to `on_result` in the model's order as soon as every call before them has
one, not only when the whole turn is done: the trace then records each finished call's result
while slower calls of the same turn still run, and a run killed half-way through a turn loses
only the results it truly had not got.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Callable, Iterator, Sequence

from ..errors import PermissionDenied, ToolError, ToolInfrastructureError
from ..messages import Message, ToolCall
from .approval import Refusal, admit
from .dispatch import DISPATCH_TOOL, unwrap
from .threads import ExitFromCode
from .tools import ArgumentsError, Tool, ToolContext, render_result

DEFAULT_MAX_RESULT_CHARS = 100_000


class ToolBatch:
    """The calls of one turn, their results, and which of them have started.

    `known` gives some calls their result in advance (a resumed run's cut turn): those calls
    are not run, and their results are handed on in order with the others.
    """

    def __init__(
        self,
        calls: Sequence[ToolCall],
        context: ToolContext,
        *,
        concurrency: int = 8,
        default_timeout: float | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        on_result: Callable[[Message], None] | None = None,
        known: Sequence[Message | None] = (),
    ) -> None:
        self.calls = list(calls)
        self.context = context
        # Each call as it will run (a dispatched one as the call it stands for), read once.
        self.unwrapped = [unwrap(call, context.toolset) for call in self.calls]
        self.default_timeout = default_timeout
        self.max_result_chars = max_result_chars
        self.results: list[Message | None] = [None] * len(self.calls)
        self.started = [False] * len(self.calls)
        self.on_result = on_result
        self.delivered = 0
        self._slots = asyncio.Semaphore(max(1, concurrency))
        for index, result in enumerate(known):
            if result is not None:  # a result given in advance (a resumed turn): not run
                self.results[index] = result
                self.started[index] = True

    async def run(self) -> list[Message]:
        self._set_ready()
        for group in self._groups():
            if len(group) == 1:
                await self._run_one(group[0])
            else:
                await asyncio.gather(*(self._run_one(i) for i in group))
        return [r for r in self.results if r is not None]

    def finish_cancelled(self) -> list[Message]:
        """Results for every call not yet handed to `on_result` (every call, without one),
        filling in `aborted` and `skipped` where none exists yet."""
        for index, call in enumerate(self.calls):
            if self.results[index] is None:
                if self.started[index]:
                    text, kind = "Aborted: the run was cancelled while this call ran.", "aborted"
                else:
                    text, kind = (
                        "Skipped: the run was cancelled before this call started.",
                        "skipped",
                    )
                self.results[index] = Message.tool_result(call, text, error_type=kind)
        rest = self.results[self.delivered :] if self.on_result else self.results
        self.delivered = len(self.results)
        return [r for r in rest if r is not None]

    def _set(self, index: int, result: Message) -> None:
        """Keep a call's result, and hand on every result whose turn has come."""
        self.results[index] = result
        self._set_ready()

    def _set_ready(self) -> None:
        """Hand `on_result` every result, in order, up to the first call still without one."""
        while (
            self.on_result is not None
            and self.delivered < len(self.results)
            and (ready := self.results[self.delivered]) is not None
        ):
            self.delivered += 1
            self.on_result(ready)

    def _groups(self) -> Iterator[list[int]]:
        group: list[int] = []
        for index, unwrapped in enumerate(self.unwrapped):
            found = None if unwrapped.error else self.context.toolset.get(unwrapped.call.name)
            if found is not None and found.exclusive:
                if group:
                    yield group
                yield [index]
                group = []
            else:
                group.append(index)
        if group:
            yield group

    async def _run_one(self, index: int) -> None:
        if self.results[index] is not None:
            return
        outer = self.calls[index]
        unwrapped = self.unwrapped[index]
        call = unwrapped.call  # a dispatched call runs as the call it stands for
        if unwrapped.error is not None:
            error = Message.tool_result(call, unwrapped.error, error_type="invalid_arguments")
            self._set(index, error)
            return
        found = self.context.toolset.get(call.name)
        if found is None:
            text = self._unknown_tool_text(call.name)
            self._set(index, Message.tool_result(call, text, error_type="unknown_tool"))
            return
        try:
            kwargs = found.parse_arguments(call.arguments)
        except ArgumentsError as exc:
            self._set(index, Message.tool_result(call, str(exc), error_type=exc.kind))
            return
        admitted = await admit(call, self.context)
        if isinstance(admitted, Refusal):
            self._set(index, Message.tool_result(call, admitted.text, error_type=admitted.kind))
            return
        async with self._slots:
            self.started[index] = True
            dispatched = call is not outer
            self._set(index, await self._invoke(found, call, kwargs, admitted, dispatched))

    async def _invoke(
        self,
        found: Tool,
        call: ToolCall,
        kwargs: dict[str, object],
        context: ToolContext,
        dispatched: bool = False,
    ) -> Message:
        trace, agent = context.trace, context.agent
        via = {"via": DISPATCH_TOOL} if dispatched else {}
        if trace is not None:
            trace.emit("tool_start", agent, call_id=call.id, name=call.name, **via)
        began = time.perf_counter()
        text, kind = await self._outcome(found, kwargs, context)
        if len(text) > self.max_result_chars:
            cut = len(text) - self.max_result_chars
            text = f"{text[: self.max_result_chars]}\n[... {cut} more characters cut]"
        if trace is not None:
            trace.emit(
                "tool_end",
                agent,
                call_id=call.id,
                name=call.name,
                error_type=kind,
                duration_ms=round((time.perf_counter() - began) * 1000, 3),
            )
        return Message.tool_result(call, text, error_type=kind)

    async def _outcome(
        self, found: Tool, kwargs: dict[str, object], context: ToolContext
    ) -> tuple[str, str | None]:
        timeout = found.timeout if found.timeout is not None else self.default_timeout
        deadline = asyncio.timeout(timeout)
        try:
            if timeout is None:
                value = await found.invoke(kwargs, context)
            else:
                async with deadline:
                    value = await found.invoke(kwargs, context)
            return render_result(value), None
        except TimeoutError:
            if deadline.expired():
                return f"Tool {found.name} timed out after {timeout:g} s.", "timeout"
            return f"Tool {found.name} raised TimeoutError.", "tool_error"
        except PermissionDenied as exc:
            return f"Permission denied: {exc}", "denied"
        except ToolInfrastructureError as exc:
            return (
                f"Tool {found.name} is unavailable (infrastructure failure): {exc}",
                "infrastructure",
            )
        except ToolError as exc:
            return str(exc), "tool_error"
        except ExitFromCode as exc:
            return f"Tool {found.name} tried to exit: {exc}. The call failed.", "tool_error"
        except (SystemExit, KeyboardInterrupt) as exc:
            # Raised by an async tool's own code: it fails this call, not the process.
            text = f"Tool {found.name} tried to exit: {type(exc).__name__}. The call failed."
            return text, "tool_error"
        except Exception as exc:
            return f"Tool {found.name} raised {type(exc).__name__}: {exc}", "tool_error"

    def _unknown_tool_text(self, name: str) -> str:
        names = self.context.toolset.names
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        available = ", ".join(names) if len(names) <= 30 else f"{len(names)} tools"
        return f"Unknown tool {name!r}.{hint} Available: {available or 'none'}."
