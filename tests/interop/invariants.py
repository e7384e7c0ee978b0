"""What must hold after any run, whatever the real model decided."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from trace_lines import trace_lines

from orchestrator import rebuild_conversations
from orchestrator.agent.run_results import Status
from orchestrator.messages import Message
from orchestrator.models import ChatModel, ModelRequest, ModelResponse, ModelWrapper

STATUSES = set(get_args(Status))


def check_trace(path: Path) -> list[dict[str, Any]]:
    """The trace of a finished run: no retry, a defined status and no error for every agent,
    every tool call answered once and in order, one model call per assistant message."""
    events = trace_lines(path)
    retries = [e for e in events if e["type"] == "model_retry"]
    assert retries == [], f"requests were retried: {retries}"
    ends = [e for e in events if e["type"] == "run_end"]
    assert ends, "no agent ran"
    for end in ends:
        assert end["status"] in STATUSES, end
        assert "error" not in end, f"{end['agent']} failed: {end['error']}"
    conversations = rebuild_conversations(path)
    calls = Counter(e["agent"] for e in events if e["type"] == "model_call")
    for agent, messages in conversations.items():
        check_calls_answered(agent, messages)
        assistant = sum(1 for m in messages if m.role == "assistant")
        assert assistant == calls[agent], f"{agent}: {assistant} replies, {calls[agent]} calls"
    return events


def check_calls_answered(agent: str, messages: Sequence[Message]) -> None:
    """Each assistant turn's calls are followed by one result per call, in the model's order."""
    for index, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        results = messages[index + 1 : index + 1 + len(message.tool_calls)]
        assert [r.role for r in results] == ["tool"] * len(message.tool_calls), agent
        assert [r.tool_call_id for r in results] == [c.id for c in message.tool_calls], agent


def check_statuses(statuses: Sequence[int]) -> None:
    """The server answered every chat request of the run with 200."""
    assert statuses, "the server logged no chat request"
    assert set(statuses) == {200}, f"the server answered with {Counter(statuses)}"


class Recorder(ModelWrapper):
    """A model that keeps every request it is sent, and passes it on (with the wrapped
    model's settings: its window, output cap and price)."""

    def __init__(self, model: ChatModel) -> None:
        super().__init__(model)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.complete(request)


def check_requests_rebuild(recorder: Recorder, trace: Path) -> None:
    """Every request any agent sent is a prefix of its conversation rebuilt from the trace,
    followed by the reply."""
    conversations = rebuild_conversations(trace)
    assert recorder.requests, "no request was sent"
    for request in recorder.requests:
        conversation = conversations[request.agent]
        sent = list(request.messages)
        assert conversation[: len(sent)] == sent, request.agent
        assert conversation[len(sent)].role == "assistant", request.agent
