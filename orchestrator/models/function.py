"""A model whose replies a Python function writes: tests decide each turn in code.

`FunctionModel(reply)` calls `reply(messages, info)` for every request: `messages` are the
conversation the agent sends, `info` (`AgentInfo`) the rest of the request (tools, tool
choice, output schema) and whom it is for (the agent's path, the run's id). The function, sync
or async, returns the reply: text (the answer), one `ToolCall` or a list of them, or a whole
assistant `Message` (text and calls together, or reasoning). A call whose `id` is empty
(`tool_call(name, **arguments)` makes one) gets an id unique in its conversation.

The model keeps nothing of a request: the function sees only the conversation of the run
that asked, so one model serves concurrent runs of one agent. Usage is counted with the
package's counter, as a provider would report it, so budgets hold. A reply no model could
give (another type, an empty list of calls, a message not the assistant's, a call id used
before, calls when the request disabled tools) raises `FunctionReplyError`, a `ModelError`:
the run ends `error`, saying what was returned.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import FunctionType, MethodType

from ..errors import FunctionReplyError
from ..messages import Message, ToolCall, ToolSpec, Usage
from ..tokens import default_counter
from .base import Model, ModelRequest, ModelResponse, OutputMode, OutputSchema, ToolChoice
from .prices import Price
from .settings import WireOptions

FUNCTION_OUTPUT_MODES: tuple[OutputMode, ...] = ("native", "tool", "prompted")


@dataclass(frozen=True)
class AgentInfo:
    """What a model function is told of a request besides its messages."""

    agent: str
    """The calling agent's path (`agent`, `planner`, `planner/summarize`)."""
    run: str
    """The id of the run the request belongs to: its trace's run id ("" outside any run)."""
    tools: Sequence[ToolSpec]
    """The tools the agent offers, with their JSON schemas."""
    tool_choice: ToolChoice
    """`auto`; `none` when the agent wants an answer without calls (its last step, a budget
    wrap-up); or the one tool it must call."""
    output_schema: OutputSchema | None
    """For a typed agent in the `native` output mode, the JSON Schema the answer's text must
    follow."""
    max_output_tokens: int
    """The most the reply may take."""


Reply = str | ToolCall | Sequence[ToolCall] | Message
"""What a model function returns: the answer's text, tool calls, or an assistant message."""
ModelFunction = Callable[[Sequence[Message], AgentInfo], Reply | Awaitable[Reply]]
"""`reply(messages, info)`, sync or async."""


def tool_call(name: str, /, **arguments: object) -> ToolCall:
    """A call of tool `name` with `arguments` (sent as JSON), for a model function to return;
    the model gives it its id."""
    return ToolCall(id="", name=name, arguments=json.dumps(arguments))


class FunctionModel(Model):
    """A model whose every reply `function(messages, info)` writes (see the module doc).

    `name` is the model's name in traces and price tables; `price` its own price (for runs
    under a money cap); `context_window`, `compact_at` and `max_output_tokens` play a model
    with those settings, as `ScriptedModel`'s do.
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        name: str = "function",
        price: Price | None = None,
        context_window: int | None = None,
        compact_at: float | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"FunctionModel needs a function, not {type(function).__name__}")
        self.function = function
        self.name = name
        self.price = price
        self.options = WireOptions(
            context_window=context_window,
            compact_at=compact_at,
            max_output_tokens=max_output_tokens,
        )
        self._call_ids = itertools.count(1)
        self._counter = default_counter()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        messages = tuple(request.messages)
        info = AgentInfo(
            agent=request.agent,
            run=request.run,
            tools=tuple(request.tools),
            tool_choice=request.tool_choice,
            output_schema=request.output_schema,
            max_output_tokens=request.max_output_tokens,
        )
        reply = self.function(messages, info)
        if inspect.isawaitable(reply):
            reply = await reply
        message = self._message(reply, messages, info)
        if not message.tool_calls:
            request.text(message.content)
        usage = Usage.of(
            self._counter.count_request(messages, request.tools),
            self._counter.count_message(message),
        )
        finish = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message=message, usage=usage, finish_reason=finish)

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        """Any: the function writes the answers. Native first: the answer is JSON text that
        follows `info.output_schema`."""
        return FUNCTION_OUTPUT_MODES

    def _message(self, reply: object, messages: Sequence[Message], info: AgentInfo) -> Message:
        """The assistant message `reply` stands for, its calls given ids; a reply no model
        could give raises `FunctionReplyError`."""
        if isinstance(reply, str):
            return Message.assistant(reply)
        if isinstance(reply, ToolCall):
            message = Message.assistant(tool_calls=[reply])
        elif isinstance(reply, Message):
            if reply.role != "assistant":
                raise self._bad(info, f"a {reply.role!r} message, not the assistant's")
            message = reply
        elif isinstance(reply, Sequence) and all(isinstance(c, ToolCall) for c in reply):
            if not reply:
                raise self._bad(info, "an empty list of tool calls; return text to answer")
            message = Message.assistant(tool_calls=list(reply))
        else:
            raise self._bad(info, _described(reply))
        if not message.tool_calls:
            return message
        if info.tool_choice == "none":
            raise self._bad(info, "tool calls, but the request said tool_choice='none'")
        used = {c.id for m in messages for c in m.tool_calls}
        calls = []
        for call in message.tool_calls:
            if not call.id:
                call = call.model_copy(update={"id": self._new_id(used)})
            elif call.id in used:
                raise self._bad(info, f"a tool call with the id {call.id!r}, already used")
            used.add(call.id)
            calls.append(call)
        return message.model_copy(update={"tool_calls": tuple(calls)})

    def _new_id(self, used: set[str]) -> str:
        while (new := f"call_{next(self._call_ids)}") in used:
            pass
        return new

    def _bad(self, info: AgentInfo, returned: str) -> FunctionReplyError:
        return FunctionReplyError(
            f"function model {_name_of(self.function)}: for agent {info.agent!r} it returned "
            f"{returned}; a reply is text (str), a ToolCall, a list of ToolCalls or an "
            "assistant Message",
            provider=self.name,
        )

    def __repr__(self) -> str:
        return f"FunctionModel({_name_of(self.function)})"


def _described(value: object) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"{shown} ({type(value).__name__})"


def _name_of(function: object) -> str:
    if isinstance(function, FunctionType | MethodType):
        return function.__qualname__
    return type(function).__name__
