"""Real runs through the Python API, against the real server and model (see conftest.py).

A recorder between the agents and the real adapter keeps every request, so each can be
compared with what the trace rebuilds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from interop_server import LlamaServer
from invariants import Recorder, check_requests_rebuild, check_statuses, check_trace

from orchestrator import Orchestrator, Permissions
from orchestrator.agent.loop import FORCED_ANSWER_NOTE, WRAP_UP_NOTE
from orchestrator.models import ModelSettings, resolve_model

pytestmark = pytest.mark.interop
GOAL = "Read the meeting notes in the workspace and list the decisions taken."


def recorded(server: LlamaServer, **settings: object) -> Recorder:
    return Recorder(resolve_model(ModelSettings.model_validate(server.model(**settings))))


def planner(model: Recorder, workspace: Path, **options: object) -> Orchestrator:
    return Orchestrator(model, permissions=Permissions(workspace=workspace), **options)


def test_the_step_cap_forces_an_answer(llama_server: LlamaServer, quickstart: Path) -> None:
    model = recorded(llama_server, stream=False)
    orchestrator = planner(model, quickstart.parent / "quickstart", max_steps=2, max_depth=0)
    offset = llama_server.log_size()

    result = orchestrator.run_sync(GOAL, trace=quickstart.parent / "t.jsonl")

    check_trace(quickstart.parent / "t.jsonl")
    check_requests_rebuild(model, quickstart.parent / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    first = model.requests[0]
    assert first.tool_choice == "auto" and first.tools
    if len(model.requests) == 2:  # the model called tools first: the last step must answer
        last = model.requests[-1]
        assert last.tool_choice == "none" and last.messages[-1].content == FORCED_ANSWER_NOTE
        assert result.status in ("completed", "max_steps")
        assert result.messages[-1].role == "assistant" and not result.messages[-1].tool_calls
    else:
        assert result.status == "completed"


def test_a_budget_too_small_for_a_call_ends_in_a_wrap_up(
    llama_server: LlamaServer, quickstart: Path
) -> None:
    model = recorded(llama_server, stream=False, max_output_tokens=256)
    workspace = quickstart.parent / "quickstart"
    first_call = planner(model, workspace).planner().first_call_tokens(GOAL)
    # Less than the first call's input and full output reserve, enough for a short wrap-up.
    orchestrator = planner(model, workspace, max_tokens=first_call - 56)
    offset = llama_server.log_size()

    result = orchestrator.run_sync(GOAL, trace=quickstart.parent / "t.jsonl")

    check_trace(quickstart.parent / "t.jsonl")
    check_requests_rebuild(model, quickstart.parent / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    assert result.status == "budget_exhausted"
    (wrap_up,) = model.requests
    assert wrap_up.tool_choice == "none" and wrap_up.messages[-1].content == WRAP_UP_NOTE
    assert 64 <= wrap_up.max_output_tokens < 256
    assert [m.role for m in result.messages][-2:] == ["user", "assistant"]


def test_streaming_asks_again_whole_where_the_server_cannot_stream(
    llama_server: LlamaServer, quickstart: Path
) -> None:
    model = recorded(llama_server)  # streaming is on by default
    orchestrator = planner(model, quickstart.parent / "quickstart", max_steps=2)
    offset = llama_server.log_size()

    result = orchestrator.run_sync(GOAL, trace=quickstart.parent / "t.jsonl")

    events = check_trace(quickstart.parent / "t.jsonl")
    check_requests_rebuild(model, quickstart.parent / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    assert result.status in ("completed", "max_steps")
    fallbacks = [e for e in events if e["type"] == "model_stream_fallback"]
    assert fallbacks and fallbacks[0]["request"] == "tools, tool_choice auto"
    assert fallbacks[0]["agent"] == "planner"
    # Sub-agents, if the model forked, ran on the planner's model: every request was recorded.
    agents = {request.agent for request in model.requests}
    assert agents == {"planner", *(f"planner/{child.id}" for child in result.children)}
