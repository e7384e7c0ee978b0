"""A short way through: the files a reader crosses from `orchestrator run` to the HTTP request,
and from `fork` to a sub-agent's model call, measured on real runs (docs/architecture.md shows
both paths file by file; this test keeps them short).

The path is the awaited one: a coroutine running in a task of its own (a step's agent, a
forked sub-agent) is reached through the code that created the task, so the stacks of the
tasks' creation are joined, outermost first, to the stack at the call."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from provider_server import ProviderServer

from orchestrator import Orchestrator
from orchestrator.cli import main
from orchestrator.models import ModelRequest, ModelResponse, ScriptedModel

MAX_RUN_TO_REQUEST = 8
MAX_FORK_TO_SUB_AGENT = 6


def package_files(stack: list[traceback.FrameSummary]) -> list[str]:
    """The package's files on a stack, outermost first, each once in a row."""
    files: list[str] = []
    for frame in stack:
        path = Path(frame.filename).as_posix()
        if "/orchestrator/" not in path or "/tests/" in path:
            continue
        name = path.rsplit("/orchestrator/", 1)[1]
        if not files or files[-1] != name:
            files.append(name)
    return files


class TaskOrigins:
    """Where each task was created: its creating task and the stack that created it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.created: dict[asyncio.Task[Any], tuple[asyncio.Task[Any] | None, list[Any]]] = {}
        create_task = asyncio.BaseEventLoop.create_task
        origins = self

        def recording(
            loop: asyncio.BaseEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any
        ) -> asyncio.Task[Any]:
            task = create_task(loop, coro, **kw)
            parent = asyncio.current_task(loop) if loop.is_running() else None
            origins.created[task] = (parent, traceback.extract_stack()[:-1])
            return task

        monkeypatch.setattr(asyncio.BaseEventLoop, "create_task", recording)

    def awaited_stack(self) -> list[Any]:
        """The stack at this point, preceded by the creation stacks of the current task and of
        each task that created it, outermost first."""
        stacks = [in_task(traceback.extract_stack())]
        task = asyncio.current_task()
        while task is not None and task in self.created:
            parent, stack = self.created[task]
            stacks.append(in_task(stack) if parent is not None else stack)
            task = parent
        return [frame for stack in reversed(stacks) for frame in stack]


def in_task(stack: list[Any]) -> list[Any]:
    """The frames a task's own coroutines run, without the event loop's and those of whatever
    started the loop."""
    starts = [
        i
        for i, frame in enumerate(stack)
        if Path(frame.filename).as_posix().endswith("asyncio/events.py") and frame.name == "_run"
    ]
    return stack[starts[-1] + 1 :] if starts else stack


@pytest.fixture
def stacks_at_send(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    found: list[list[str]] = []
    send = httpx.AsyncClient.send
    origins = TaskOrigins(monkeypatch)

    async def spy(self: httpx.AsyncClient, request: httpx.Request, **kw: Any) -> httpx.Response:
        found.append(package_files(origins.awaited_stack()))
        return await send(self, request, **kw)

    monkeypatch.setattr(httpx.AsyncClient, "send", spy)
    yield found


def test_from_orchestrator_run_to_the_http_request(
    tmp_path: Path, stacks_at_send: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: p\nmodel: openai-compatible:local\nsteps:\n  - {id: one, task: Say hi.}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0000")
    with ProviderServer({"*": [{"content": "hi"}]}) as server:
        base = f"base_url={server.openai_url}"
        assert main(["run", "job.yaml", "-q", "--model-option", base]) == 0

    files = stacks_at_send[-1]  # the model call (the first request asks the server's window)
    assert files[:2] == ["cli/__init__.py", "cli/run.py"] and files[-1] == "models/http.py"
    assert "agent/model_call.py" in files
    assert len(set(files)) <= MAX_RUN_TO_REQUEST, files


def test_from_fork_to_a_sub_agents_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    stacks: dict[str, list[str]] = {}
    origins = TaskOrigins(monkeypatch)

    class Spy(ScriptedModel):
        async def complete(self, request: ModelRequest, **options: Any) -> ModelResponse:
            agent = self._agent_of(request)
            stacks.setdefault(agent, package_files(origins.awaited_stack()))
            return await super().complete(request, **options)

        def _agent_of(self, request: ModelRequest) -> str:
            first = request.messages[-1].content or ""
            return "planner/a" if first == "Say hi." else "planner"

    fork = {"tasks": [{"id": "a", "task": "Say hi."}]}
    script = {
        "planner": [{"tool_calls": [{"name": "fork", "arguments": fork}]}, {"content": "ok"}],
        "planner/a": [{"content": "hi"}],
    }
    result = Orchestrator(Spy(script)).run_sync("Go.")

    assert result.status == "completed" and result.children[0].output == "hi"
    sub_agent = stacks["planner/a"]
    files = sub_agent[sub_agent.index("tasks/fork.py") :]
    assert files[-1] == "agent/model_call.py"  # the sub-agent's loop is calling its model
    assert len(set(files)) <= MAX_FORK_TO_SUB_AGENT, files
