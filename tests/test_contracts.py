"""The core's declared contracts: an extension overrides the hooks it needs and the loop calls
them; a model carries its settings and price, and a run never writes onto a caller's model."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator as orchestrator_cli
from trace_lines import trace_lines

from orchestrator import Agent, Orchestrator, Permissions, load_job, tool
from orchestrator.agent import Extension, Refusal, ToolContext
from orchestrator.events import RunEnd, ToolStart, TraceEvent
from orchestrator.messages import Message, ToolCall, Usage
from orchestrator.models import (
    ModelRequest,
    ModelResponse,
    PricedModel,
    ScriptedModel,
    context_window,
    options_of,
    price_of,
    unwrap,
)
from orchestrator.models.prices import Price
from orchestrator.parts import MissingPart, Slot
from orchestrator.tasks import ForkExtension, SubagentRegistry
from orchestrator.trace import NullTrace, Trace

PACKAGE = Path(__file__).resolve().parents[1] / "orchestrator"


@tool
def lookup(n: int) -> str:
    """Look a number up.

    Args:
        n: The number.
    """
    return f"entry {n}"


class NoOdd(Extension):
    """Overrides one hook: a guard that refuses odd lookups."""

    def guard(self, call: ToolCall, ctx: ToolContext) -> Refusal | None:
        if '"n": 1' in call.arguments:
            return Refusal("odd numbers are not looked up here")
        return None


class Held(Extension):
    """Overrides one hook: what it holds lives exactly as long as the run."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def run_scope(self) -> AbstractAsyncContextManager[object]:
        return self._scope()

    @asynccontextmanager
    async def _scope(self) -> AsyncIterator[None]:
        self.log.append("open")
        try:
            yield
        finally:
            self.log.append("closed")


def test_an_extension_overrides_only_the_hooks_it_needs() -> None:
    script: dict[str, Any] = {
        "*": [
            {"tool_calls": [{"name": "lookup", "arguments": {"n": 1}}]},
            {"tool_calls": [{"name": "lookup", "arguments": {"n": 2}}]},
            {"content": "done"},
        ]
    }
    held = Held()
    result = Agent(ScriptedModel(script), [lookup], extensions=[NoOdd(), held]).run_sync("go")
    assert result.status == "completed"
    answers = [m.content for m in result.messages if m.role == "tool"]
    assert "odd numbers are not looked up here" in (answers[0] or "")
    assert answers[1] == "entry 2"
    assert held.log == ["open", "closed"]


def test_no_hook_is_found_by_probing_an_object() -> None:
    """The loop, the layers above it and the CLI call declared hooks: no
    `getattr(x, "hook", ...)` with a literal name (the MCP and A2A clients, the report and
    telemetry read third-party objects)."""
    core = [
        p for p in PACKAGE.rglob("*.py") if not {"mcp", "a2a", "report", "telemetry"} & set(p.parts)
    ]
    probes = []
    for path in core:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value
                in {
                    "guard",
                    "run_scope",
                    "start_record",
                    "restore",
                    "fork_skill",
                    "arrived",
                    "settle",
                    "options",
                    "price",
                    "context_window",
                    "compact_at",
                    "server_window",
                    "inner",
                    "paused",
                    "orchestrator",
                    "job",
                    "model",
                }
            ):
                probes.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert probes == []


def test_two_runs_sharing_a_model_object_are_each_billed_at_their_own_prices() -> None:
    model = ScriptedModel({"*": [{"content": "ok"}] * 2})
    cheap = Orchestrator(model, prices={"scripted": Price(input=1, output=1)}, max_cost=5.0)
    dear = Orchestrator(model, prices={"scripted": Price(input=100, output=100)}, max_cost=5.0)
    first, second = cheap.run_sync("go"), dear.run_sync("go")
    assert model.price is None  # the caller's object is as it was
    assert first.cost is not None and second.cost is not None
    assert second.cost == pytest.approx(100 * first.cost)
    assert isinstance(cheap.model, PricedModel) and unwrap(cheap.model) is model


def test_a_model_of_ones_own_needs_only_a_name_and_complete() -> None:
    class Plain:
        name = "mine:plain"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(Message.assistant("hello"), Usage.of(3, 1))

    plain = Plain()
    assert options_of(plain).context_window is None and price_of(plain) is None
    assert context_window(plain) is None
    result = Agent(plain).run_sync("hi")
    assert (result.status, result.output) == ("completed", "hello")


def test_a_wrapper_keeps_the_settings_of_the_model_it_wraps() -> None:
    model = ScriptedModel({"*": [{"content": "ok"}]}, context_window=9_000)
    priced = PricedModel(model, Price(input=1, output=2))
    window = context_window(priced)
    assert window is not None and window.tokens == 9_000
    assert price_of(priced) == Price(input=1, output=2) and price_of(model) is None


OPTIONAL = ("orchestrator.a2a", "orchestrator.mcp", "orchestrator.ray", "orchestrator.report")
OPTIONAL += ("orchestrator.telemetry", "orchestrator.eval")


def test_the_core_loads_no_optional_part_by_name() -> None:
    """A module path in a string is an import in disguise: the core finds optional parts
    through a `Slot`, filled from the package's entry points."""
    loads = []
    for path in PACKAGE.rglob("*.py"):
        if {"cli", "mcp", "a2a", "ray", "eval", "report", "telemetry"} & set(path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and any(
                isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.startswith(OPTIONAL)
                for arg in node.args
            ):
                loads.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert loads == []


def test_a_slot_serves_a_part_of_ones_own_and_names_what_is_missing() -> None:
    slot: Slot[Callable[[], str]] = Slot("greeter", "orchestrator.test_greeters")
    with pytest.raises(MissingPart, match="no greeter is named 'hello'.*installed: none"):
        slot.get("hello")
    slot.register("hello", lambda: "hi")
    assert slot.get("hello")() == "hi"


def test_the_package_declares_its_optional_parts() -> None:
    from orchestrator.planner import EXECUTORS
    from orchestrator.ray import from_spec
    from orchestrator.skills.servers import TOOL_SOURCES

    assert EXECUTORS.get("ray") is from_spec
    assert TOOL_SOURCES.get("mcp").__module__ == "orchestrator.mcp.skill_servers"


def test_a_remote_agent_without_its_extra_fails_its_task_saying_what_to_install(
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "no-a2a" / "a2a"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('no module named a2a')\n")
    (tmp_path / "script.json").write_text('{"*": [{"content": "unused"}]}')
    (tmp_path / "job.yaml").write_text(
        "name: far\nmodel: scripted:script.json\n"
        "agents:\n  echo: {a2a: 'http://127.0.0.1:9/', description: Echoes.}\n"
        "steps:\n  - {id: far, agent: echo, task: hi}\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(hidden.parent), os.environ.get("PYTHONPATH", "")])}
    done = orchestrator_cli("run", "job.yaml", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 3, done.stderr
    reason = json.loads(done.stdout)["steps"][0]["reason"]
    assert "remote agent 'echo' cannot be reached" in reason
    assert "pip install 'orchestrator[a2a]'" in reason


def test_a_tool_stays_callable_as_the_function_it_was() -> None:
    assert lookup(3) == "entry 3"
    assert lookup.name == "lookup"


def test_the_package_ships_its_types() -> None:
    assert (PACKAGE / "py.typed").is_file()
    pyproject = (PACKAGE.parent / "pyproject.toml").read_text()
    # The wheel ships the package folder whole, py.typed with it (tests/test_skills_packaging.py
    # builds one and looks).
    assert '[tool.hatch.build.targets.wheel]\npackages = ["orchestrator"]' in pyproject


def test_an_orchestrator_keeps_nothing_of_a_past_run(tmp_path: Path) -> None:
    orchestrator = Orchestrator(ScriptedModel({"*": [{"content": "ok"}] * 2}))
    before = orchestrator.permissions.model_dump()
    for name in ("one", "two"):
        result = orchestrator.run_sync("go", trace=tmp_path / f"{name}.jsonl")
        assert result.status == "completed"
    assert orchestrator.permissions.model_dump() == before


def test_a_jobs_prices_file_is_read_once(tmp_path: Path) -> None:
    """The check before a run and the run price with one table: the file is not read again."""
    (tmp_path / "script.json").write_text('{"*": [{"content": "ok"}]}')
    (tmp_path / "prices.yaml").write_text("scripted: {input: 2, output: 4}\n")
    (tmp_path / "job.yaml").write_text(
        "name: priced\nmodel: scripted:script.json\nprices: prices.yaml\n"
        "budget: {max_cost_usd: 1}\ngoal: Go.\n"
    )
    job = load_job(tmp_path / "job.yaml")
    orchestrator = Orchestrator.from_job(job)
    assert orchestrator.preflight(job).problems == []
    (tmp_path / "prices.yaml").write_text("[not: a price table")  # changed after the check
    result = orchestrator.run_job_sync(job)
    assert result.status == "completed"
    assert job.price_overrides()["scripted"] == Price(input=2, output=4)


@pytest.mark.parametrize("given", ["agent", "run"])
def test_an_agents_trace_is_read_only_to_its_own_file_tools(tmp_path: Path, given: str) -> None:
    """The trace is the run's checkpoint: a model that rewrites it would decide how its run
    resumes. An `Agent` keeps it read-only, given at construction or to one run."""
    trace = tmp_path / "work" / "run.jsonl"
    trace.parent.mkdir()
    forge = {"name": "files__write_file", "arguments": {"path": "run.jsonl", "content": "x"}}
    load = {"name": "load_skill", "arguments": {"name": "files"}}
    turns = [{"tool_calls": [load]}, {"tool_calls": [forge]}, {"content": "done"}]
    model = ScriptedModel({"*": turns})
    permissions = Permissions(workspace=tmp_path / "work")
    if given == "agent":
        agent = Agent(model, skills=[], permissions=permissions, trace=trace)
        result = agent.run_sync("Forge your trace.")
    else:
        agent = Agent(model, skills=[], permissions=permissions)
        result = agent.run_sync("Forge your trace.", trace=trace)
    assert result.status == "completed"
    answer = [m for m in result.messages if m.role == "tool"][-1]
    assert "run.jsonl" in (answer.content or "") and "cannot change it" in (answer.content or "")
    assert trace_lines(trace)[0]["type"] == "run_start"  # still the run's own record


def test_a_preloaded_skill_whose_code_is_refused_is_in_refused(tmp_path: Path) -> None:
    """A skill a step starts with, whose `tools.py` lies where the model may write, is
    refused before the first step: the result's `refused` says so, as for a load."""
    from orchestrator.skills import SkillCatalog, SkillsExtension

    folder = tmp_path / "work" / "skills" / "notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: notes\ndescription: Notes.\n---\nBody.\n")
    (folder / "tools.py").write_text(
        "from orchestrator import tool\n\n\n@tool\ndef note() -> str:\n"
        '    """A note."""\n    return "n"\n'
    )
    catalog = SkillCatalog([tmp_path / "work" / "skills"], include_builtin=False)
    skills = SkillsExtension(catalog, preload=["notes"])
    model = ScriptedModel({"*": [{"content": "done"}]})
    permissions = Permissions(workspace=tmp_path / "work")
    with pytest.warns(UserWarning, match="tools.py is not imported"):
        agent = Agent(model, skills=skills, permissions=permissions)
    result = agent.run_sync("go")
    assert result.status == "completed"
    assert "load_skill:notes" in result.refused, result.refused


def test_an_agent_imports_no_resume_signing_replay_or_graph_code() -> None:
    """`from orchestrator import Agent` loads what a run needs: reading a trace back,
    resuming, signing, the task graph, `skills check`, iterating a run's events and
    structured answers come when something uses them."""
    code = (
        "import sys\nfrom orchestrator import Agent\n"
        "print(' '.join(m for m in sys.modules if m.startswith(('orchestrator', 'networkx'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout.split()
    unwanted = ("restart", "checkpoint", "signing", "replay", "resume", "reader", "networkx")
    unwanted += ("skills.check", "run_events", "agent.output", "skills.servers", "parts")
    assert [m for m in loaded if any(word in m for word in unwanted)] == []
    assert len([m for m in loaded if m.startswith("orchestrator")]) <= 40, len(loaded)


def test_a_new_job_run_loads_no_resume_code(tmp_path: Path) -> None:
    """`orchestrator run` of the quickstart loads what a new run needs: resuming, restoring
    tasks and reading earlier traces come only with a run that resumes; the progress view
    only without `-q`, the approval prompt only on a terminal, `skills check`, iterating a
    run's events, structured answers and background forks only when something uses them, the
    MCP server pool only when a skill declares servers, what words a spec's problems only
    for a spec that has some, and the summary behind `trace show` only there."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    (tmp_path / "quickstart.yaml").write_text((examples / "quickstart.yaml").read_text())
    (tmp_path / "quickstart.script.yaml").write_text(
        (examples / "quickstart.script.yaml").read_text()
    )
    shutil.copytree(examples / "quickstart", tmp_path / "quickstart")
    code = (
        "import sys\nfrom orchestrator.cli import main\n"
        "code = main(['run', 'quickstart.yaml', '-q'])\n"
        "print(code, ' '.join(m for m in sys.modules if m.startswith('orchestrator')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    status, *loaded = done.stdout.splitlines()[-1].split()
    assert status == "0", done.stderr
    unwanted = ("restart", "checkpoint", "resume", "restore", "reader", "replay")
    unwanted += ("cli.progress", "cli.rows", "cli.approval", "skills.check", "run_events")
    unwanted += ("tasks.background", "trace.summary", "agent.output")
    unwanted += ("skills.servers", "jobs.problems")
    assert [m for m in loaded if any(word in m for word in unwanted)] == []
    assert len(loaded) <= 60, len(loaded)


# Modules whose `trace` is a file's path (a spec field, a `--trace PATH` option, a run's
# record), not the run's Trace: a None there means "no file".
TRACE_PATH_MODULES = {
    "cli/ask.py",
    "cli/run.py",
    "jobs/spec.py",
    "jobs/outputs.py",
    "jobs/loading.py",
    "eval/scoring.py",
    "eval/python_checks.py",
}


def _is_trace(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "trace") or (
        isinstance(node, ast.Attribute) and node.attr == "trace"
    )


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _trace_none_checks(path: Path) -> list[tuple[str, int]]:
    """Each comparison of a `trace` (a name, or an attribute such as `ctx.trace`) with None,
    and each test of one's truth (`if trace`, `trace and ...`): the function it is in, and
    its line."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_is_trace, sides)) and any(map(_is_none, sides)):
                found.append((function, node.lineno))
        tested: list[ast.expr] = []
        if isinstance(node, ast.If | ast.IfExp | ast.While):
            tested = [node.test]
        elif isinstance(node, ast.BoolOp):
            tested = list(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            tested = [node.operand]
        found.extend((function, t.lineno) for t in tested if _is_trace(t))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text()), "")
    return found


def test_the_core_asks_no_trace_whether_it_is_there() -> None:
    """A run given no trace holds a NullTrace, so nothing asks `trace is None`: only where
    `trace` is a file's path (TRACE_PATH_MODULES) does None mean something."""
    checks, in_path_modules = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for function, line in _trace_none_checks(path):
            if module in TRACE_PATH_MODULES:
                in_path_modules.append(module)
            else:
                checks.append(f"{module}:{line} ({function})")
    assert checks == []
    # The scan sees what it looks for: each path module's own checks of its path are found.
    assert set(in_path_modules) == TRACE_PATH_MODULES


CHECKPOINT_READERS = {
    "jobs/runner.py": "a job's run, which resumes the run its trace was opened on",
    "a2a/client.py": "a remote agent's task, which asks its server again for it",
    "ray/executor.py": "the workers' recipe, which carries the checkpoint to each worker",
}


def test_only_a_run_s_entry_asks_the_trace_for_what_it_resumes() -> None:
    """Resume in one place: an agent is handed its history (`run(history=...)`), and the
    tasks of a resumed run are restored by one layer wrapped around their executor
    (tasks/restore.py). The loop, the scheduler and the fork never ask a trace what it
    resumes (`trace.checkpoint`): only a run's entry does (CHECKPOINT_READERS)."""
    asked: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "checkpoint"
                and (_is_trace(node.value) or ast.unparse(node.value) == "opened")
            ):
                asked.setdefault(path.relative_to(PACKAGE).as_posix(), []).append(node.lineno)
    assert set(asked) == set(CHECKPOINT_READERS), asked


def _files_under(*folders: Path) -> set[Path]:
    return {p for folder in folders for p in folder.rglob("*") if p.is_file()}


def test_a_run_without_a_trace_writes_nothing_and_its_events_still_reach_listeners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_config_folder: Path
) -> None:
    seen_by_tools: list[Trace] = []

    @tool
    def look(ctx: ToolContext, n: int) -> str:
        """Look a number up.

        Args:
            n: The number.
        """
        seen_by_tools.append(ctx.trace)
        return f"entry {n}"

    tasks = [{"id": "a", "task": "look 2"}]
    script: dict[str, Any] = {
        "planner": [
            {"tool_calls": [{"name": "look", "arguments": {"n": 1}}]},
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "done"},
        ],
        "planner/a": [
            {"tool_calls": [{"name": "look", "arguments": {"n": 2}}]},
            {"content": "a done"},
        ],
    }

    def agent(trace: Trace | None = None) -> Agent:
        return Agent(
            ScriptedModel(script),
            [look],
            name="planner",
            extensions=[ForkExtension(SubagentRegistry(), tools=[look])],
            trace=trace,
        )

    monkeypatch.chdir(tmp_path)
    home = own_config_folder.parent
    before = _files_under(tmp_path, home)

    result = agent().run_sync("go")
    assert result.status == "completed" and result.trace is None
    assert [type(t) for t in seen_by_tools] == [NullTrace, NullTrace]
    assert not seen_by_tools[0].recording and seen_by_tools[0].path is None

    heard: list[TraceEvent] = []  # a trace in memory, with a listener: events, still no file
    assert agent().run_sync("go", trace=Trace(listeners=[heard.append])).trace is None
    calls = [(e.agent, e.name) for e in heard if isinstance(e, ToolStart)]
    assert calls == [("planner", "look"), ("planner", "fork"), ("planner/a", "look")]

    async def iterate(trace: Trace | None) -> list[TraceEvent]:
        async with agent(trace).iter("go") as run:
            return [event async for event in run]

    for given in (None, NullTrace()):  # `iter` keeps the events in memory
        events = asyncio.run(iterate(given))
        ends = {e.agent: e.status for e in events if isinstance(e, RunEnd)}
        assert ends == {"planner": "completed", "planner/a": "completed"}

    assert _files_under(tmp_path, home) == before
    with pytest.raises(TypeError, match="records no events"), NullTrace().listening(print):
        pass  # a listener of the null trace would hear nothing: refused, not silent
