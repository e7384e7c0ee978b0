"""The typed events of a run (orchestrator/events.py): every kind the package emits is a kind
of the union, a real run's trace parses with no event skipped, unknown kinds and wrong shapes
are None, and extra fields are kept."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

import orchestrator
from orchestrator import Agent, Trace, events, read_trace
from orchestrator.events import (
    EVENT_KINDS,
    EVENT_SCHEMA_VERSION,
    EventBase,
    JobEnd,
    ListenerError,
    MessageEvent,
    ModelCall,
    PartEvent,
    TaskEnd,
    TraceEvent,
    parse_event,
)
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, SubagentRegistry
from orchestrator.trace import load_checkpoint

PACKAGE = Path(orchestrator.__file__).parent


def emitted_kinds() -> dict[str, str]:
    """Every event kind a call of `emit` in the package names, and where: the class given
    (`trace.emit(ToolStart, ...)`) or made (`request.emit(ModelRetry(...))`). A kind named as
    text is reported as such, to fail."""
    kinds: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr != "emit" or not node.args:
                continue
            given = node.args[0]
            if isinstance(given, ast.Call):
                given = given.func
            where = f"{path.relative_to(PACKAGE)}:{node.lineno}"
            if isinstance(given, ast.Name):
                kinds[given.id] = where
            elif isinstance(given, ast.Constant):
                kinds[f"text {given.value!r}"] = where
    return kinds


def test_every_kind_the_package_emits_is_a_typed_kind_of_the_core_or_of_a_part() -> None:
    kinds = emitted_kinds()
    assert len(kinds) >= 30, sorted(kinds)
    aliases = {"ModelCalled": "ModelCall", "ModelFailed": "ModelError"}
    parts = [f"orchestrator.{p.parent.name}.events" for p in PACKAGE.glob("*/events.py")]
    assert {"orchestrator.a2a.events", "orchestrator.ray.events"} <= set(parts)
    known: dict[str, type[EventBase]] = {}
    for module in (events, *map(importlib.import_module, parts)):
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, EventBase):
                known[name] = value
    unknown = {k: where for k, where in kinds.items() if aliases.get(k, k) not in known}
    assert not unknown
    for name in kinds:
        kind = known[aliases.get(name, name)]
        tag = kind.model_fields["type"].default
        assert tag in EVENT_KINDS or issubclass(kind, PartEvent), name


def test_a_real_run_parses_with_no_event_skipped(tmp_path: Path) -> None:
    skills = tmp_path / "skills" / "notes"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Take notes.\n---\nWrite short notes.\n", encoding="utf-8"
    )
    fork = {"name": "fork", "arguments": {"tasks": [{"id": "a", "task": "x"}]}}
    script: dict[str, list[dict[str, Any]]] = {
        "planner": [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "notes"}}]},
            {"tool_calls": [fork]},
            {"content": "done"},
        ],
        "planner/a": [{"content": "a done"}],
    }
    path = tmp_path / "t.jsonl"
    agent = Agent(
        ScriptedModel(script),
        name="planner",
        skills=[tmp_path / "skills"],
        extensions=[ForkExtension(SubagentRegistry())],
        trace=path,
    )
    assert agent.run_sync("go").status == "completed"
    with Trace(path, resume=_retrying(path)) as trace:  # what `resume --retry-failed` writes
        trace.emit(JobEnd, agent="job", status="completed")

    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    parsed = [parse_event(line) for line in lines]
    assert None not in parsed
    kinds = {event.type for event in parsed if event is not None}
    assert {"skill_loaded", "fork", "task_start", "task_end", "retry", "run_end"} <= kinds
    read = read_trace(path)
    assert read.skipped == 0 and len(read) == len(lines)
    # The first event of each attempt says which version of the format it is written in.
    firsts = [e for e in lines if e["seq"] in (1, lines[-2]["seq"])]
    assert [e.get("schema") for e in firsts] == [EVENT_SCHEMA_VERSION, EVENT_SCHEMA_VERSION]


def _retrying(path: Path) -> Any:
    checkpoint = load_checkpoint(path)
    checkpoint.retrying = ["planner/a"]
    return checkpoint


def test_compaction_events_parse(tmp_path: Path) -> None:
    def note(name: str) -> str:
        """Read a note."""
        return f"{name}: " + "word " * 400

    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "note", "arguments": {"name": f"n{i}"}}]} for i in range(12)
    ]
    model = ScriptedModel({"*": [*turns, {"content": "read"}]}, context_window=4096)
    path = tmp_path / "t.jsonl"
    Agent(model, [note], max_steps=20, max_output_tokens=512, trace=path).run_sync("Read.")
    lines = path.read_text(encoding="utf-8").splitlines()
    parsed = [parse_event(json.loads(line)) for line in lines]
    assert None not in parsed
    assert any(e is not None and e.type == "compact" and e.replaced for e in parsed)


def test_unknown_kinds_and_wrong_shapes_are_none_and_extra_fields_are_kept() -> None:
    base = {"seq": 3, "ts": 1.5, "run": "r", "attempt": 1, "agent": "planner"}
    assert parse_event({**base, "type": "from_a_newer_version"}) is None
    assert parse_event({**base, "type": "model_call", "step": 1, "usage": "x"}) is None
    assert parse_event({**base, "type": "task_end", "id": "a", "status": 5}) is None
    assert parse_event({**base, "type": "task_end", "status": "completed"}) is None  # no id
    wrong = {"id": "a", "status": "error", "overlap_s": True}
    assert parse_event({**base, "type": "task_end", **wrong}) is None
    assert parse_event({"type": "run_end"}) is None

    usage = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    call = parse_event({**base, "type": "model_call", "step": 1, "usage": usage, "new": [1]})
    assert isinstance(call, ModelCall) and call.usage.total_tokens == 5
    assert call.model_extra == {"new": [1]}
    message = parse_event(
        {**base, "type": "message", "message": {"role": "tool", "content": "x", "is_error": True}}
    )
    assert isinstance(message, MessageEvent) and message.message.is_error
    line = {**base, "type": "task_end", "id": "a", "status": "completed", "worker": "w1"}
    ended = parse_event(line)
    assert isinstance(ended, TaskEnd) and ended.model_extra == {"worker": "w1"}
    # Its fields are attributes; the line it was is `as_line()`, never the event itself.
    assert ended.as_line() == line
    with pytest.raises(TypeError):
        ended["status"]  # type: ignore[index]
    assert not hasattr(ended, "get") and not hasattr(ended, "keys")


def test_a_listener_that_raises_never_ends_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(event: TraceEvent) -> None:
        raise RuntimeError("the listener broke")

    seen: list[str] = []
    path = tmp_path / "t.jsonl"
    with Trace(path, listeners=[broken, lambda e: seen.append(e.type)]) as trace:
        agent = Agent(ScriptedModel({"*": [{"content": "done"}]}), trace=trace)
        result = agent.run_sync("go")

    assert result.status == "completed" and result.output == "done"
    # The others kept hearing every event, the failure's own included.
    assert seen[0] == "run_start" and seen[-1] == "run_end" and "listener_error" in seen
    errors = [e for e in read_trace(path) if isinstance(e, ListenerError)]
    assert len(errors) == 1 and errors[0].error == "RuntimeError: the listener broke"
    assert "broken" in errors[0].listener
    assert capsys.readouterr().err.count("the listener broke") == 1
