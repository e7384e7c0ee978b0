"""What may add to an agent: a section of its system prompt and tools, a guard, a restore.

Skills (the index and `load_skill`) and forks (`fork`, `read_task_output`) are extensions; they
live in the layers above the loop, which sees only this protocol. An extension may also have:

- a `guard(call, ctx)` method, which every call of the agent's runs passes before it starts
  (agent/turn_calls.py): a skill's `allowed-tools` is enforced that way;
- a `restore(context, record, messages)` method (`Restorable`), which gives it back its
  per-run state when a run resumes from its trace (agent/restart.py);
- a `run_scope()` method returning an async context manager, which the run enters before its
  first step and leaves after its last, errors and cancellation included: what the extension
  holds for the run (the skills' MCP servers) lives that long;
- a `start_record()` method returning fields for the run's `run_start` event (the skills an
  agent starts with loaded);
- `arrived(context)` and `settle(context, answered=...)` (`WorkAside`), for work that goes on
  beside the run (the fork extension's background tasks): before each model call the loop
  appends what `arrived` returns, after the last turn, so the conversation only grows at its
  end; before the run ends, `settle` waits for that work or ends it, and what it returns after
  a final answer goes to the agent, which then answers again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from ..errors import ConfigError
from ..messages import Message
from ..trace import AgentRecord
from .tools import Guard, Tool, ToolContext, as_tool


class Extension(Protocol):
    """Something that adds to an agent: a section of its system prompt and tools."""

    def system_prompt(self) -> str | None: ...

    def tools(self) -> Sequence[Tool]: ...


@runtime_checkable
class Restorable(Protocol):
    """An extension with per-run state to bring back when a run resumes."""

    def restore(
        self, context: ToolContext, record: AgentRecord, messages: Sequence[Message]
    ) -> None: ...


@runtime_checkable
class WorkAside(Protocol):
    """An extension with work going on beside the agent's own turns."""

    def arrived(self, context: ToolContext) -> list[Message]:
        """Messages for the agent about work that ended since its last model call."""
        ...

    async def settle(self, context: ToolContext, *, answered: bool) -> list[Message]:
        """The run is about to end (`answered`: with a final answer; else cut short): wait for
        the work or end it, each with a complete record. Messages returned after an answer
        go to the agent, which answers again."""
        ...


def assemble(
    tools: Iterable[Tool | Callable[..., object]],
    system: str | None,
    extensions: Sequence[Extension],
) -> tuple[list[Tool], str | None]:
    """An agent's tools and system prompt: its own first, then each extension's, in order.

    Raises ConfigError when two tools share a name.
    """
    found = [as_tool(t) for t in tools]
    for extension in extensions:
        found.extend(extension.tools())
    seen: set[str] = set()
    for item in found:
        if item.name in seen:
            raise ConfigError(
                f"two tools are named {item.name!r}; tool names must be unique "
                "(the names fork, read_task_output, wait_tasks, task_status, cancel_tasks, "
                "load_skill, read_skill_file and search_skills belong to the built-in "
                "meta-tools)"
            )
        seen.add(item.name)
    parts = [system] if system else []
    parts.extend(p for e in extensions if (p := e.system_prompt()))
    return found, "\n\n".join(parts) or None


def guards_of(extensions: Sequence[Extension]) -> list[Guard]:
    """The `guard` methods of the extensions that have one, in order."""
    return [guard for e in extensions if callable(guard := getattr(e, "guard", None))]


def start_records(extensions: Iterable[object]) -> dict[str, object]:
    """The fields the extensions add to a run's `run_start` event."""
    fields: dict[str, object] = {}
    for extension in extensions:
        record = getattr(extension, "start_record", None)
        if callable(record):
            fields.update(record())
    return fields


def scopes_of(
    extensions: Iterable[object],
) -> list[Callable[[], AbstractAsyncContextManager[object]]]:
    """The `run_scope` methods of the extensions that hold something for a run."""
    return [scope for e in extensions if callable(scope := getattr(e, "run_scope", None))]
