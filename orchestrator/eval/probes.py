"""Compaction probes: what a run's model still knew at a chosen point, asked after the run.

The trace keeps every request an agent sent, compaction stubs and all (`models/replay.py`
reads it back as `RecordedAgent.prefix`). A probe rebuilds the conversation one agent had
after its Nth model call (its tool results in), or at its end (its final answer in), appends
its question as a user message, and asks a model (the run's own, or the eval's
`probe_model`) for a text answer, tools off. What compaction cut is then really missing from
what the model reads; the answer is held to the probe's checks like any run's output.

The trace keeps the names of a request's tools, not their schemas, so the probe's request
lists each tool by name only, with `tool_choice: none`: a provider that wants every tool
call in the conversation to name a declared tool accepts it, and none can be called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..agent import TokenBudget
from ..agent.model_call import call_model
from ..errors import OrchestratorError
from ..messages import Message, ToolSpec, Usage
from ..models import ChatModel
from ..models.replay import RecordedAgent, load_recording
from ..tokens import TokenCounter, default_counter
from ..trace import NullTrace
from .spec import Probe

PROBE_AGENT = "probe"
PROBE_OUTPUT_TOKENS = 512
NOT_CALLABLE = "(not callable while answering this question)"


@dataclass
class ProbePoint:
    """The conversation an agent had at a probe's point, and the tools its request named;
    `missing` says why there is none (the point was never reached)."""

    messages: list[Message] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    at: str = ""
    """Where, as results say it: `goal after call 3 of 14`, `goal at its end (call 14)`."""
    missing: str | None = None


@dataclass
class ProbeAnswer:
    """What the model answered at a probe's point, and what asking cost; `error` when it
    could not be asked."""

    text: str = ""
    at: str = ""
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    error: str | None = None


def recorded_agents(trace: Path) -> dict[str, RecordedAgent]:
    """Every agent's requests in a run's trace. Raises ConfigError when it has none."""
    agents, _ = load_recording(trace)
    return agents


def point(agents: dict[str, RecordedAgent], agent: str, after: int | str) -> ProbePoint:
    """The conversation `agent` had after its `after`th model call (`end`, or its last
    call: all of it, its final answer in)."""
    recorded = agents.get(agent)
    if recorded is None or not recorded.turns:
        known = ", ".join(sorted(name for name, a in agents.items() if a.turns)) or "none"
        missing = f"no model call of agent {agent!r} in the trace (agents: {known})"
        return ProbePoint(at=f"{agent} after call {after}", missing=missing)
    calls = len(recorded.turns)
    if not isinstance(after, int) or after == calls:
        where = f"{agent} at its end (call {calls})"
        return ProbePoint(list(recorded.conversation), _names(recorded, calls - 1), where)
    where = f"{agent} after call {after} of {calls}"
    if after > calls:
        return ProbePoint(at=where, missing=f"not reached: agent {agent!r} made {calls} calls")
    return ProbePoint(recorded.prefix(after), _names(recorded, after), where)


def _names(agent: RecordedAgent, turn: int) -> list[str]:
    return list(agent.turns[turn].tools or [])


async def ask(
    probe: Probe,
    at: ProbePoint,
    model: ChatModel,
    budget: TokenBudget,
    *,
    step: int,
    counter: TokenCounter | None = None,
) -> ProbeAnswer:
    """Ask `probe`'s question of the conversation at `at`; a failure is the answer's
    `error`, never the eval's end."""
    if at.missing is not None:
        return ProbeAnswer(at=at.at, error=at.missing)
    messages = [*at.messages, Message.user(probe.question)]
    tools = [
        ToolSpec(name=name, description=NOT_CALLABLE, parameters={"type": "object"})
        for name in at.tools
    ]
    try:
        call = await call_model(
            model,
            messages,
            tools,
            counter=counter or default_counter(),
            budget=budget,
            tool_choice="none",
            max_output_tokens=PROBE_OUTPUT_TOKENS,
            agent=PROBE_AGENT,
            step=step,
            trace=NullTrace(),  # not a run's call: nothing of it is recorded
        )
    except OrchestratorError as exc:
        return ProbeAnswer(at=at.at, error=f"asking failed: {type(exc).__name__}: {exc}")
    if call is None:
        return ProbeAnswer(at=at.at, error="the eval's budget could not cover the probe's call")
    message = call.response.message
    answer = ProbeAnswer(message.content or "", at.at, call.usage, call.cost)
    if not answer.text.strip():
        called = ", ".join(c.name for c in message.tool_calls)
        answer.error = f"answered with a tool call ({called})" if called else "answered nothing"
    return answer
