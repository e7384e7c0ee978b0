"""Failures injected on a real HTTP server: what retries, what does not, and what users see."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from provider_server import Fault, ProviderServer, anthropic_whole, openai_whole
from trace_lines import into, trace_lines

from orchestrator import Agent, Trace
from orchestrator.errors import ModelError, RetryableModelError
from orchestrator.events import ModelRetry, ModelWait, RunStart
from orchestrator.messages import Message
from orchestrator.models import ChatModel, ModelRequest, resolve_model
from orchestrator.trace import Event, load_checkpoint

KEY = "sk-test-faults-0123456789"
PROVIDERS = ["openai", "anthropic"]
HELLO = {"*": [{"content": "Hello there, friend."}]}


def model_for(provider: str, server: ProviderServer, **options: Any) -> ChatModel:
    return server.adapter(provider, KEY, **options)


async def run(model: ChatModel, trace_path: Path | None = None) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    trace = Trace(trace_path, listeners=[into(events)], secrets=[])
    with trace:
        result = await Agent(model, trace=trace).run("Say hello.")
    return result, events


def retries(events: list[Event]) -> list[Event]:
    return [e for e in events if e["type"] == "model_retry"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_waits_as_long_as_retry_after_says(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("status", 429, headers={"retry-after": "0.3"}, message="Rate limit"))
        began = time.perf_counter()
        result, events = await run(model_for(provider, server, backoff_base=0.0))
        elapsed = time.perf_counter() - began
    assert (result.status, result.output) == ("completed", "Hello there, friend.")
    assert len(server.requests) == 2
    [retry] = retries(events)
    assert (retry["request_attempt"], retry["status"], retry["delay"]) == (1, 429, 0.3)
    assert "Rate limit" in retry["error"]
    assert elapsed >= 0.3


async def test_a_retry_in_a_resumed_run_keeps_the_runs_attempt_and_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    with Trace(path) as first:
        first.emit(RunStart, agent="agent", task="Say hello.")  # cut off here
    with ProviderServer(HELLO) as server:
        server.fail(Fault("status", 500, message="The server had an error"))
        with Trace(path, resume=load_checkpoint(path)) as second:
            agent = Agent(model_for("openai", server), trace=second)
            result = await agent.run("Say hello.", history=second.history(agent.name))
    assert result.status == "completed"
    [line] = [e for e in trace_lines(path) if e["type"] == "model_retry"]
    assert (line["attempt"], line["request_attempt"]) == (2, 1)
    retry = ModelRetry.model_validate(line)
    assert (retry.attempt, retry.request_attempt) == (2, 1)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retry_after_ms_is_honoured(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("status", 503, headers={"retry-after-ms": "40", "retry-after": "9"}))
        result, events = await run(model_for(provider, server))
    assert result.status == "completed"
    assert [e["delay"] for e in retries(events)] == [0.04]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_500_then_success(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("status", 500, message="The server had an error"))
        result, events = await run(model_for(provider, server))
    assert (result.status, result.output) == ("completed", "Hello there, friend.")
    assert len(server.requests) == 2
    [retry] = retries(events)
    assert retry["status"] == 500
    assert retry["error"].startswith(f"{provider}: HTTP 500 from {server.url}")


async def test_anthropic_overloaded_event_mid_stream_is_retried() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("error_event", 529, message="Overloaded", after=4))
        result, events = await run(model_for("anthropic", server))
    assert (result.status, result.output) == ("completed", "Hello there, friend.")
    assert len(server.requests) == 2
    [retry] = retries(events)
    assert retry["status"] == 529
    assert retry["error"] == "anthropic: error in the stream: Overloaded [overloaded_error]"


async def test_openai_error_chunk_mid_stream_is_retried() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("error_event", message="The server had an error", after=3))
        result, events = await run(model_for("openai", server))
    assert result.output == "Hello there, friend."
    assert "The server had an error" in retries(events)[0]["error"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_connection_dropped_mid_stream_is_retried_from_the_start(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("drop", after=3))
        result, events = await run(model_for(provider, server))
    # Nothing of the broken attempt leaks into the answer.
    assert (result.status, result.output) == ("completed", "Hello there, friend.")
    assert len(server.requests) == 2
    [retry] = retries(events)
    assert "status" not in retry  # no HTTP status: the connection failed
    assert f"{provider}: connection to {server.url}" in retry["error"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_ends_early_is_retried(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("cut", after=3))
        result, events = await run(model_for(provider, server))
    assert result.output == "Hello there, friend."
    assert retries(events)[0]["error"] == (
        f"{provider}: the stream ended before the reply was complete"
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_malformed_event_line_is_retried(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("malformed", after=2))
        result, events = await run(model_for(provider, server))
    assert result.output == "Hello there, friend."
    assert len(server.requests) == 2
    assert "malformed stream event" in retries(events)[0]["error"]


@pytest.mark.parametrize(("provider", "stream"), [("openai", True), ("anthropic", False)])
async def test_a_slow_response_times_out_and_is_retried(provider: str, stream: bool) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("slow", delay=0.6))
        model = model_for(provider, server, timeout=0.2, stream=stream)
        result, events = await run(model)
    assert result.output == "Hello there, friend."
    assert len(server.requests) == 2
    path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    assert retries(events)[0]["error"] == (
        f"{provider}: {server.url}{path} sent nothing for 0.2 s (timed out)"
    )


async def test_when_every_attempt_is_slow_the_run_ends_in_error() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("slow", delay=0.5), Fault("slow", delay=0.5))
        result, events = await run(model_for("openai", server, timeout=0.15, max_retries=1))
    assert result.status == "error"
    assert result.error is not None
    assert result.error.endswith("sent nothing for 0.15 s (timed out) (gave up after 2 attempts)")
    assert len(retries(events)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_401_is_raised_at_once_without_the_key(provider: str, tmp_path: Path) -> None:
    trace_path = tmp_path / "trace.jsonl"
    with ProviderServer(HELLO, api_key="sk-the-right-key-000") as server:
        result, events = await run(model_for(provider, server), trace_path)
    assert result.status == "error"
    assert len(server.requests) == 1
    assert retries(events) == []
    # The server echoed the key it was given; the user sees the server's words, masked.
    assert result.error == (
        f"{provider}: HTTP 401 from {server.url}"
        f"{'/v1/chat/completions' if provider == 'openai' else '/v1/messages'}: "
        "Incorrect API key provided: [REDACTED]"
        + (" [server_error]" if provider == "openai" else " [authentication_error]")
    )
    assert KEY not in trace_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("status", [400, 403, 404, 422])
async def test_client_errors_are_not_retried(status: int) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("status", status, message="You did it wrong"))
        model = model_for("openai", server)
        with pytest.raises(ModelError) as caught:
            await model.complete(ModelRequest(messages=[Message.user("hi")]))
    assert not isinstance(caught.value, RetryableModelError)
    assert caught.value.status == status
    assert caught.value.provider == "openai"
    assert f"HTTP {status}" in str(caught.value) and "You did it wrong" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_after_the_last_retry_the_run_ends_in_error(provider: str) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(*[Fault("status", 503, message="Service unavailable")] * 3)
        result, events = await run(model_for(provider, server, max_retries=2))
    assert result.status == "error"
    assert len(server.requests) == 3
    assert [e["request_attempt"] for e in retries(events)] == [1, 2]
    assert result.error is not None
    assert "HTTP 503" in result.error and "Service unavailable" in result.error
    assert result.error.endswith("(gave up after 3 attempts)")


async def test_a_retry_after_beyond_the_cap_is_not_waited_for() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("status", 429, headers={"retry-after": "3600"}))
        result, _ = await run(model_for("openai", server, max_retry_after=60))
    assert result.status == "error"
    assert len(server.requests) == 1
    assert result.error is not None
    assert "asked to wait 3600 s, more than max_retry_after=60 s" in result.error


async def test_the_key_is_masked_in_retry_events_and_errors() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(*[Fault("status", 500, message=f"bad key {KEY}")] * 2)
        result, events = await run(model_for("openai", server, max_retries=1))
    assert result.status == "error"
    assert result.error is not None and KEY not in result.error
    assert "bad key [REDACTED]" in result.error
    assert all(KEY not in str(e) for e in events)


async def test_nothing_listening_is_a_connection_error() -> None:
    with ProviderServer(HELLO) as server:
        model = model_for("openai", server, max_retries=1)
    result, events = await run(model)  # the server is gone
    assert result.status == "error"
    assert result.error is not None
    assert result.error.startswith(f"openai: connection to {server.url}/v1/chat/completions failed")
    assert len(retries(events)) == 1


async def test_concurrent_calls_wait_for_a_place_under_the_limit() -> None:
    script = {"*": [{"content": f"answer {i}"} for i in range(6)]}
    events: list[object] = []
    with ProviderServer(script, latency=0.1) as server:
        model = model_for("openai", server, max_concurrency=2)
        requests = [
            ModelRequest(messages=[Message.user(f"q{i}")], on_event=events.append) for i in range(6)
        ]
        responses = await asyncio.gather(*(model.complete(r) for r in requests))
    assert sorted(r.message.content or "" for r in responses) == [f"answer {i}" for i in range(6)]
    assert server.max_in_flight == 2
    waits = [event for event in events if isinstance(event, ModelWait)]
    assert len(waits) == 4
    assert all(w.limit == 2 and (w.waited_ms or 0) >= 50 for w in waits)
    assert {w.endpoint for w in waits} == {server.openai_url}


async def test_the_limit_holds_across_agents_and_shows_in_their_trace() -> None:
    script = {"*": [{"content": "done"}] * 4}
    events: list[Event] = []
    trace = Trace(listeners=[into(events)], secrets=[])
    with ProviderServer(script, latency=0.1) as server:
        agents = [
            Agent(model_for("openai", server, max_concurrency=1), name=f"worker{i}", trace=trace)
            for i in range(4)
        ]
        results = await asyncio.gather(*(a.run("go") for a in agents))
    assert [r.status for r in results] == ["completed"] * 4
    assert server.max_in_flight == 1
    waited = {e["agent"] for e in events if e["type"] == "model_wait"}
    assert len(waited) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_that_ignores_stream_and_sends_json_is_understood(provider: str) -> None:
    message = Message.assistant("Whole, not streamed.")
    whole = openai_whole if provider == "openai" else anthropic_whole
    with ProviderServer(HELLO) as server:
        server.fail(Fault("json", payload=whole(message, (7, 3), "test-model")))
        result, _ = await run(model_for(provider, server, stream=True))
    assert (result.output, result.usage.total_tokens) == ("Whole, not streamed.", 10)


@pytest.mark.parametrize(
    ("provider", "payload"),
    [
        ("openai", {"choices": [{"message": "not an object"}]}),
        ("anthropic", {"content": [], "stop_reason": ["not", "a", "string"]}),
    ],
)
async def test_a_reply_of_an_unexpected_shape_is_a_model_error(
    provider: str, payload: dict[str, Any]
) -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("json", payload=payload))
        result, _ = await run(model_for(provider, server, stream=False))
    assert result.status == "error"
    assert result.error is not None
    assert result.error.startswith(f"{provider}: could not read the reply from {server.url}")
    assert len(server.requests) == 1


async def test_429_for_exhausted_quota_is_not_retried() -> None:
    quota = {"message": "You exceeded your current quota.", "code": "insufficient_quota"}
    with ProviderServer(HELLO) as server:
        server.fail(
            Fault("status", 429, payload={"error": {**quota, "type": "insufficient_quota"}})
        )
        result, events = await run(model_for("openai", server))
    assert result.status == "error"
    assert len(server.requests) == 1 and retries(events) == []
    assert result.error is not None
    assert result.error.endswith("You exceeded your current quota. [insufficient_quota]")


class DeepErrorServer(BaseHTTPRequestHandler):
    """Answers every request 400 with a JSON error nested 100,000 levels deep."""

    body = b'{"error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_body_nested_too_deeply_is_a_model_error(provider: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), DeepErrorServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        model = resolve_model(
            f"{provider}:test-model",
            base_url=f"{base}/v1" if provider == "openai" else base,
            api_key=KEY,
        )
        with pytest.raises(ModelError) as caught:
            await model.complete(ModelRequest(messages=[Message.user("hi")]))
    finally:
        server.shutdown()
        server.server_close()
    assert caught.value.status == 400 and "HTTP 400" in str(caught.value)
