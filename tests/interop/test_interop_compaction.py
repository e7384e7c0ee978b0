"""A long run compacted many times against the real server at `-c 4096` (see conftest.py).

The real server reads every request (its tokenizer, its chat template, its window); only the
agent's decisions are scripted, so that the run is long enough to be cut again and again and
keeps a note worth checking: the model's reply is read, then its tool calls are the script's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from interop_server import SEED, start_server, stop_server
from invariants import check_calls_answered, check_statuses
from trace_lines import trace_lines

from orchestrator import Agent, rebuild_conversations
from orchestrator.messages import Message, ToolCall
from orchestrator.models import (
    ChatModel,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelWrapper,
    resolve_model,
)

pytestmark = pytest.mark.interop
WINDOW = 4096
NOTES = 10
DECISION = "Decision: the report is CSV. Dead end: a regex split broke on quoted commas."
PHRASE = (
    "the ledger shows that the invoice was booked twice in the same month and the clerk who "
    "checked it said the payment had not reached the supplier before the quarter closed"
)
WORDS = PHRASE.split()


class ScriptedDecisions(ModelWrapper):
    """The real model answers each request; the script decides what the agent does next."""

    def __init__(self, model: ChatModel, turns: list[dict[str, Any]]) -> None:
        super().__init__(model)
        self.turns = iter(turns)
        self.requests: list[ModelRequest] = []
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        response = await self.inner.complete(request)
        turn = next(self.turns)
        calls = []
        for call in turn.get("tool_calls", []):
            self.calls += 1
            calls.append(
                ToolCall(
                    id=f"call_{self.calls}", name=call["name"], arguments=json.dumps(call["args"])
                )
            )
        message = Message.assistant(turn.get("content"), calls)
        return ModelResponse(message, response.usage, response.finish_reason)


def turns() -> list[dict[str, Any]]:
    calls = [
        {"name": "load_skill", "args": {"name": "files"}},
        {"name": "note", "args": {"text": DECISION}},
        {"name": "files__write_file", "args": {"path": "report.csv", "content": "note\n"}},
        *({"name": "files__read_file", "args": {"path": f"n{i}.txt"}} for i in range(NOTES)),
    ]
    return [*({"tool_calls": [c]} for c in calls), {"content": "done"}]


def test_a_long_run_in_a_4096_window_keeps_its_note_and_pairs_every_call(
    tmp_path: Path,
) -> None:
    for i in range(NOTES):
        text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(300))
        (tmp_path / f"n{i}.txt").write_text(f"note {i}: {text}")
    process, server = start_server(tmp_path / "server.log", n_ctx=WINDOW)
    try:
        settings = {
            "name": "openai-compatible:smollm2",
            "base_url": server.base_url,
            "temperature": 0,
            "timeout": 120,
            "stream": False,
            "context_window": WINDOW,
            "extra_body": {"seed": SEED},
        }
        model = ScriptedDecisions(resolve_model(ModelSettings.model_validate(settings)), turns())
        agent = Agent(
            model,
            skills=[],
            note=True,
            max_steps=NOTES + 8,
            max_output_tokens=32,
            permissions={"workspace": str(tmp_path)},
            trace=tmp_path / "t.jsonl",
        )
        result = agent.run_sync("Read every note and write the report.")
        statuses = server.statuses_since(0)
    finally:
        stop_server(process)

    assert result.status == "completed", result.error
    check_statuses(statuses)  # no request refused: every one was answered 200
    assert len(statuses) == len(model.requests) == NOTES + 4
    cuts = [e for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "compact"]
    assert len(cuts) >= 3
    for request in model.requests:
        check_calls_answered("agent", request.messages)
    for request in model.requests[2:]:  # after the note: in every request
        assert any(DECISION in (m.content or "") for m in request.messages)
    for request in model.requests[3:]:  # and the file the run changed
        assert any("report.csv" in (m.content or "") for m in request.messages)
    check_calls_answered("agent", rebuild_conversations(tmp_path / "t.jsonl")["agent"])
    print(f"\nINTEROP requests={len(statuses)} cuts={len(cuts)} usage={result.usage.record()}")
