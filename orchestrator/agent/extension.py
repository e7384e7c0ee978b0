"""What may add to an agent: `Extension`, the base class with every hook the loop calls.

Skills (the index and `load_skill`) and forks (`fork`, `read_task_output`) are extensions; they
live in the layers above the loop, which sees only this class. Each hook is declared here with
its default, and the loop calls every hook of every extension: an extension overrides the ones
it needs, and nothing asks an object what it can do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..events import InputRequest, RunStartFields
from ..messages import Message, ToolCall
from ..security import Permissions
from .compaction import CompactionPlan, CompactionRequest
from .tools import Preapproval, Refusal, Tool, ToolContext, as_tool

if TYPE_CHECKING:
    from ..trace import AgentHistory


_NO_SCOPE = nullcontext()  # one for every run of every extension that holds nothing


class Extension:
    """Something that adds to an agent. Every hook has a default that adds nothing."""

    def system_prompt(self) -> str | None:
        """A section of the agent's system prompt, after the agent's own."""
        return None

    def tools(self) -> Sequence[Tool]:
        """Tools the agent gets, after its own (their names must be unique)."""
        return ()

    def trailing_tools(self) -> Sequence[Tool]:
        """Tools particular to this agent (the tools of the skills it starts with), after
        every extension's `tools`: agents of one tree then begin their tools arrays alike, and
        a sub-agent's first request reads the prefix its parent's requests cached (providers
        cache the tools array first)."""
        return ()

    def guard(self, call: ToolCall, ctx: ToolContext) -> Refusal | None:
        """Every call of the agent's runs passes each extension's guard before it starts
        (agent/turn_calls.py): a refusal becomes the call's error result. A skill's
        `allowed-tools` is enforced this way."""
        return None

    def preapproval(self, call: ToolCall, ctx: ToolContext) -> Preapproval | None:
        """A call the run's permissions mark `ask` (and no guard refused) may run without
        asking when an extension grants it (an active skill's `allowed-tools`); a refused
        `Preapproval` says why it was not, for the message. A call the permissions deny is
        never run (agent/turn_calls.py)."""
        return None

    def before_call(self, context: ToolContext) -> None:
        """Called before each model call of a run. Raising `RunHalted` ends the run as
        `error` with its message (a skill that failed to load, in a run asked to fail on
        that)."""

    def run_permissions(self, permissions: Permissions) -> Permissions:
        """The permissions one run was given (`AgentLoop.run(permissions=...)`), as this
        extension needs them kept: the skills extension keeps its folders read-only."""
        return permissions

    def run_scope(self) -> AbstractAsyncContextManager[object]:
        """Entered before a run's first step and left after its last, errors and cancellation
        included: what the extension holds for the run (the skills' MCP servers) lives that
        long."""
        return _NO_SCOPE

    def refused(self) -> dict[str, str]:
        """What the extension refused before the agent's first step, under the run's safety
        rules (a preloaded skill whose code it would not run), keyed as `RunResult.refused`
        is (`load_skill:NAME`), with the reason."""
        return {}

    def start_record(self) -> RunStartFields:
        """Fields for the run's `run_start` event (the skills an agent starts with loaded)."""
        return {}

    def restore(
        self, context: ToolContext, history: AgentHistory, messages: Sequence[Message]
    ) -> None:
        """A run resumes from its `history`: give back the extension's per-run state (in
        `context`) from its record and the rebuilt `messages` (agent/restart.py)."""

    def arrived(self, context: ToolContext) -> list[Message]:
        """Work beside the agent's turns (background forks): messages about work that ended
        since the last model call. The loop appends them before its next call, after the last
        turn, so the conversation only grows at its end."""
        return []

    async def compact(
        self, context: ToolContext, request: CompactionRequest
    ) -> CompactionPlan | None:
        """A compactor of one's own: when the agent's conversation must shrink to fit its
        context window, which of the `request`'s candidate tool results become stubs, and a
        summary of them for the newest stub to carry (agent/compaction.py). None leaves it to
        the agent's strategy (`compaction`: `mask` or `summarize`); the first extension that
        returns a plan decides. The loop keeps the rest: the pairing, the cached prefix, what
        is pinned, the working record, and each cut result retrievable (`read_compacted`)."""
        return None

    async def settle(self, context: ToolContext, *, answered: bool) -> list[Message]:
        """The run is about to end (`answered`: with a final answer; else cut short): wait
        for the work beside it or end it, each with a complete record. Messages returned after
        an answer go to the agent, which then answers again."""
        return []

    def waiting(self, context: ToolContext) -> list[InputRequest]:
        """What the work beside the run waits for a person to answer (a background task's
        question, agent/waiting.py): a run that would complete ends `input_required` with
        it instead, to be resumed with the answers."""
        return []


def assemble(
    tools: Iterable[Tool | Callable[..., object]],
    system: str | None,
    extensions: Sequence[Extension],
) -> tuple[list[Tool], str | None]:
    """An agent's tools and system prompt: its own first, then each extension's, in order
    (the extensions' trailing tools after all the others).

    Raises ConfigError when two tools share a name.
    """
    found = [as_tool(t) for t in tools]
    for extension in extensions:
        found.extend(extension.tools())
    for extension in extensions:
        found.extend(extension.trailing_tools())
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
