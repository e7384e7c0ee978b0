"""OpenTelemetry export: GenAI spans from real runs, caught by the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import orchestrator.telemetry
from orchestrator import Agent, ConfigError, Orchestrator, TokenBudget, Trace, load_job, tool
from orchestrator.events import ModelRetry, ModelWait, RunStart, ToolStart
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, SubagentRegistry
from orchestrator.telemetry import instrument

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    yield provider, exported
    provider.shutdown()


def fork_call(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "fork", "arguments": {"tasks": list(tasks)}}]}


def planner(model: ScriptedModel, **options: Any) -> Agent:
    return Agent(model, name="planner", extensions=[ForkExtension(SubagentRegistry())], **options)


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (found,) = [s for s in spans if s.name == name]
    return found


def parent_of(spans: tuple[ReadableSpan, ...], span: ReadableSpan) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def chain(spans: tuple[ReadableSpan, ...], span: ReadableSpan) -> list[str]:
    """The names from `span` up to its root."""
    names = [span.name]
    while (span := parent_of(spans, span)) is not None:
        names.append(span.name)
    return names


def chat_tokens(spans: tuple[ReadableSpan, ...]) -> int:
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    return sum(
        s.attributes["gen_ai.usage.input_tokens"] + s.attributes["gen_ai.usage.output_tokens"]
        for s in chats
    )


NESTED = {
    "planner": [
        fork_call({"id": "team", "task": "Split this further."}),
        {"content": "all done"},
    ],
    "planner/team": [
        fork_call({"id": "leaf", "task": "Do the smallest part."}, {"id": "twig", "task": "x"}),
        {"content": "team done"},
    ],
    "planner/team/leaf": [
        {"tool_calls": [{"name": "nope", "arguments": {}}]},
        {"content": "leaf done"},
    ],
    "planner/team/twig": [{"content": "twig done"}],
}


def test_nested_forks_give_nested_spans_whose_chat_tokens_are_the_budget_spend(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exported = exporter
    budget = TokenBudget(100_000)
    with instrument(provider):
        result = planner(ScriptedModel(NESTED), budget=budget).run_sync("go")

    assert result.status == "completed"
    spans = exported.get_finished_spans()
    leaf = by_name(spans, "invoke_agent planner/team/leaf")
    assert chain(spans, leaf) == [
        "invoke_agent planner/team/leaf",
        "fork planner/team",
        "execute_tool fork",
        "invoke_agent planner/team",
        "fork planner",
        "execute_tool fork",
        "invoke_agent planner",
    ]
    chats = [s for s in spans if s.name == "chat scripted"]
    assert len(chats) == 7
    assert all(parent_of(spans, s).name.startswith("invoke_agent") for s in chats)
    assert chat_tokens(spans) == budget.used == result.total_usage.total_tokens
    attributes = chats[0].attributes
    assert attributes["gen_ai.provider.name"] == "scripted"
    assert attributes["gen_ai.request.model"] == "scripted"
    assert attributes["gen_ai.response.finish_reasons"] in (("tool_calls",), ("stop",))
    assert "gen_ai.input.messages" not in attributes  # content only when asked for
    # A call to an unknown tool never ran; its span says so, with the error.
    unknown = by_name(spans, "execute_tool nope")
    assert unknown.status.status_code is StatusCode.ERROR
    assert unknown.attributes["error.type"] == "unknown_tool"
    assert unknown.attributes["orchestrator.tool.started"] is False
    agent = by_name(spans, "invoke_agent planner/team")
    assert agent.attributes["gen_ai.agent.name"] == "planner/team"
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.status.status_code is StatusCode.UNSET
    for span in spans:
        assert span.end_time >= span.start_time


def test_a_failed_task_and_the_one_it_skipped(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exported = exporter
    script = {
        "planner": [
            fork_call({"id": "a", "task": "x"}, {"id": "b", "task": "y", "depends_on": ["a"]}),
            {"content": "a failed"},
        ],
        "planner/a": [],  # no turns: its run ends in an error
    }
    with instrument(provider):
        planner(ScriptedModel(script)).run_sync("go")

    spans = exported.get_finished_spans()
    failed = by_name(spans, "invoke_agent planner/a")
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "error"
    assert "no turn left" in failed.status.description
    fork = by_name(spans, "fork planner")
    assert [(e.name, e.attributes["orchestrator.task.id"]) for e in fork.events] == [
        ("task_skipped", "b")
    ]
    assert "dependency 'a' ended error" in fork.events[0].attributes["reason"]
    assert not [s for s in spans if s.name == "invoke_agent planner/b"]


def test_a_job_is_a_workflow_span_over_its_steps(
    exporter: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    provider, exported = exporter
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("out"))
    job = load_job(tmp_path / "examples" / "code-review.yaml")
    with instrument(provider):
        # No trace file: the spans come all the same.
        result = Orchestrator.from_job(job).run_job_sync(job)

    assert result.status == "completed" and result.trace is None
    spans = exported.get_finished_spans()
    workflow = by_name(spans, "invoke_workflow code-review")
    assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert parent_of(spans, by_name(spans, "fork job")) == workflow
    steps = [s for s in spans if s.name.startswith("invoke_agent")]
    assert sorted(s.name for s in steps) == [
        "invoke_agent export",
        "invoke_agent inventory",
        "invoke_agent pricing",
        "invoke_agent synthesis",
    ]
    assert {parent_of(spans, s).name for s in steps} == {"fork job"}
    assert steps[0].attributes["orchestrator.subagent"] in ("reviewer", "writer")
    assert steps[0].attributes["orchestrator.skills"] == ("files",)
    tools = [s for s in spans if s.name == "execute_tool files__read_file"]
    assert len(tools) == 3 and all(s.attributes["gen_ai.tool.call.id"] for s in tools)
    assert chat_tokens(spans) == result.usage.total_tokens
    assert workflow.attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens


def test_message_content_only_when_asked_for_and_masked(
    exporter: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exported = exporter
    monkeypatch.setenv("DEMO_API_KEY", "sk-very-secret-value")

    @tool
    def echo(text: str) -> str:
        """Say it back.

        Args:
            text: what to say
        """
        return text

    script = {
        "*": [
            {"tool_calls": [{"name": "echo", "arguments": {"text": "sk-very-secret-value"}}]},
            {"content": "done"},
        ]
    }
    with instrument(provider, capture_content=True):
        Agent(ScriptedModel(script), [echo], system="Be brief.").run_sync("Echo the key.")

    spans = exported.get_finished_spans()
    first, second = [s for s in spans if s.name == "chat scripted"]
    assert first.attributes["gen_ai.system_instructions"] == "Be brief."
    assert '"content": "Echo the key."' in first.attributes["gen_ai.input.messages"]
    assert '"type": "tool_call"' in first.attributes["gen_ai.output.messages"]
    assert '"content": "done"' in second.attributes["gen_ai.output.messages"]
    call = by_name(spans, "execute_tool echo")
    assert call.attributes["gen_ai.tool.call.result"] == "[REDACTED]"
    assert "sk-very-secret-value" not in call.attributes["gen_ai.tool.call.arguments"]
    for span in spans:
        assert "sk-very-secret-value" not in str(dict(span.attributes))


async def test_a_cancelled_run_ends_every_span_with_its_error(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exported = exporter
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    script = {"*": [{"tool_calls": [{"name": "slow", "arguments": {}}]}]}
    with instrument(provider):
        run = asyncio.create_task(Agent(ScriptedModel(script), [slow]).run("go"))
        await asyncio.wait_for(started.wait(), 5)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    spans = exported.get_finished_spans()
    call = by_name(spans, "execute_tool slow")
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == "aborted"
    agent = by_name(spans, "invoke_agent agent")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes["error.type"] == "cancelled"


def test_a_trace_closed_mid_run_ends_what_is_open(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exported = exporter
    with instrument(provider):
        trace = Trace()
    trace.emit(RunStart, agent="agent", model="openai:gpt-4o-mini", depth=0)
    trace.emit(ToolStart, agent="agent", call_id="c1", name="files__read_file")
    trace.close()

    spans = exported.get_finished_spans()
    assert {s.name for s in spans} == {"invoke_agent agent", "execute_tool files__read_file"}
    agent = by_name(spans, "invoke_agent agent")
    assert agent.attributes["gen_ai.provider.name"] == "openai"
    assert agent.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)


def test_uninstrument_stops_the_spans(
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exported = exporter
    instrumentation = instrument(provider)
    instrumentation.uninstrument()
    Agent(ScriptedModel({"*": [{"content": "hi"}]})).run_sync("hello")
    assert exported.get_finished_spans() == ()
    assert Trace().sinks == []


def test_without_the_extra_instrument_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "orchestrator.telemetry.spans")
    monkeypatch.delattr(orchestrator.telemetry, "spans")
    with pytest.raises(ConfigError, match=r'pip install "orchestrator\[otel\]"'):
        instrument()
    assert Trace().sinks == []


def test_usage_cache_counts_light_up_when_usage_has_them() -> None:
    from orchestrator.events import TokenCounts
    from orchestrator.telemetry.genai import usage_attributes

    usage = TokenCounts(input_tokens=120, output_tokens=8, cache_read_tokens=100)
    assert usage_attributes(usage) == {
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 8,
        "gen_ai.usage.cache_read.input_tokens": 100,
    }
    assert os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") is None


class Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver on 127.0.0.1: keeps each POST to /v1/traces."""

    received: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_run_with_otel_sends_the_spans_over_otlp_http(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("out"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    Collector.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "run", "examples/code-review.yaml"]
            + ["--otel", "--json", "--quiet", "--trace", "t.jsonl"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={
                **os.environ,
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            },
        )
    finally:
        server.shutdown()
        server.server_close()

    assert done.returncode == 0, done.stderr
    assert Collector.received and {r[0] for r in Collector.received} == {"/v1/traces"}
    spans = []
    for _, content_type, body in Collector.received:
        assert content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "orchestrator"
            spans.extend(span for scope in resource.scope_spans for span in scope.spans)
    names = [span.name for span in spans]
    assert names.count("invoke_workflow code-review") == 1
    assert sorted(n for n in names if n.startswith("invoke_agent")) == [
        "invoke_agent export",
        "invoke_agent inventory",
        "invoke_agent pricing",
        "invoke_agent synthesis",
    ]
    tokens = 0
    for span in spans:
        values = {a.key: a.value for a in span.attributes}
        if span.name.startswith("chat "):
            assert values["gen_ai.operation.name"].string_value == "chat"
            tokens += values["gen_ai.usage.input_tokens"].int_value
            tokens += values["gen_ai.usage.output_tokens"].int_value
    assert tokens == json.loads(done.stdout)["usage"]["total_tokens"]


def test_run_with_otel_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    # A stand-in for an install without the extra: the exporter cannot be imported.
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['opentelemetry.exporter.otlp.proto.http.trace_exporter'] = None\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(EXAMPLES / "quickstart.yaml"), "--otel"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert done.returncode == 2
    assert 'pip install "orchestrator[otel]"' in done.stderr
    assert not (tmp_path / ".orchestrator").exists()


class LeakyModel(ScriptedModel):
    """A hostile model: its retry notes and its final error repeat the API key and a URL
    with credentials in it."""

    async def complete(self, request: Any) -> Any:
        request.emit(
            ModelRetry(
                agent=request.agent, request_attempt=1, error="401 for key sk-leaky-secret-value-1"
            )
        )
        request.emit(
            ModelWait(agent=request.agent, endpoint="https://bob:hunter2pass@models.example/v1")
        )
        raise orchestrator.errors.ModelError(
            "rejected sk-leaky-secret-value-1 at https://bob:hunter2pass@models.example/v1"
        )


def test_span_statuses_and_events_are_masked_like_attributes(
    exporter: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exported = exporter
    monkeypatch.setenv("LEAKY_API_KEY", "sk-leaky-secret-value-1")
    with instrument(provider):
        result = Agent(LeakyModel({"*": []})).run_sync("go")
    assert result.status != "completed"

    spans = exported.get_finished_spans()
    agent = by_name(spans, "invoke_agent agent")
    assert agent.status.status_code is StatusCode.ERROR
    assert "rejected [REDACTED] at https://[REDACTED]@models.example/v1" in (
        agent.status.description or ""
    )
    events = {e.name: dict(e.attributes or {}) for e in agent.events}
    assert events["model_retry"]["error"] == "401 for key [REDACTED]"
    assert events["model_wait"]["endpoint"] == "https://[REDACTED]@models.example/v1"
    for span in spans:
        seen = f"{span.status.description} {dict(span.attributes or {})} " + " ".join(
            f"{e.name} {dict(e.attributes or {})}" for e in span.events
        )
        assert "sk-leaky-secret-value-1" not in seen and "hunter2pass" not in seen
