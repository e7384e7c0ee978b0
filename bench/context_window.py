"""A long-running agent in a small context window: its tokens and cache share, compacted.

One agent makes 200 tool calls, each reading a note (real files of 150 to 1,500 tokens, the
same seeded sizes every run), then answers. The same scripted decisions run twice:

- `16k window`: the model declares a 16,384-token window (`context_window`); the agent asks
  for at most the room left, and compacts its conversation past 80% of the window
  (agent/compaction.py);
- `16k window, with notes`: the same, with `compaction="summarize"`: at each compaction the model
  writes notes on what is cut (about 250 tokens here), one more call each time;
- `16k window, counted its own way`: the same as the first, with a model whose chat template
  takes 12 tokens a message where we count 3 (so it counts a file's result about as we do,
  and the turns and stubs a compaction leaves about twice as dearly), which says its count of
  each prompt in its replies, as providers do: the agent fits its requests in the model's
  measure;
- `unlimited`: no window is known: the conversation grows with every result (what a model
  with a window of a million tokens would be sent).

For each: the model calls, the input tokens sent (our offline count of every request), the
largest request with the answer allowance it asked for and its share of the window (in the
model's own count: a request over 100% is one a provider refuses), the least answer
allowance asked, the compactions, and the share of input a provider's prompt cache serves.
The cache follows OpenAI's published rules (bench/cache_rules.py: an exact prefix of at
least 1,024 tokens, counted in steps of 128, over the wire body our adapter writes); each
request is compared with the one before it, which for one agent's conversation is the
longest prefix any earlier request shares. "Input tokens" is our offline count of the
requests (what the window is compared with), "on the wire" the tokens of the JSON bodies the
cache rules see; "effective input" prices a cached wire token at 0.1.

    python bench/context_window.py [--steps 200] [--window 16384] [--answer 2048] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cache_rules import OPENAI_MIN_PREFIX, OPENAI_STEP, READ_PRICE
from orchestrator import Agent, read_trace, tool
from orchestrator.messages import Usage
from orchestrator.models import ScriptedModel
from orchestrator.models.base import ModelRequest, ModelResponse
from orchestrator.models.openai import OpenAIOptions, build_body
from orchestrator.tokens import default_counter

SYSTEM = (
    "You are a research agent. Read the notes you are pointed to, one by one, and keep track "
    "of what they say about the project's open questions. When you have read them all, "
    "answer with a summary of the open questions and who raised each."
)
WORDS = ("budget", "window", "cache", "planner", "fork", "trace", "resume", "skill", "note")


def write_notes(folder: Path, count: int, seed: int = 30) -> list[str]:
    """`count` notes of 150 to 1,500 tokens (two tokens a word here), seeded."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(count):
        words = rng.randint(75, 750)
        text = " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 99)}" for _ in range(words))
        name = f"note{i:03}.md"
        (folder / name).write_text(f"# Note {i}\n\n{text}\n", encoding="utf-8")
        names.append(name)
    return names


TEMPLATE_TOKENS = 12


def own_count(request: ModelRequest) -> int:
    """A prompt as a server with a chat template of its own counts it: the text as ours does,
    and `TEMPLATE_TOKENS` for each message and each tool schema (where we count 3)."""
    counter = default_counter()
    texts = [json.dumps(spec.parameters) + spec.name + spec.description for spec in request.tools]
    for message in request.messages:
        calls = "".join(call.name + call.arguments for call in message.tool_calls)
        texts.append(message.role + (message.content or "") + calls)
    return sum(counter.count_text(text) + TEMPLATE_TOKENS for text in texts)


class OwnCountModel(ScriptedModel):
    """The scripted model, reporting each prompt in its own count (`own_count`)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        output = response.usage.output_tokens if response.usage is not None else 0
        return replace(response, usage=Usage.of(own_count(request), output))


def run_agent(
    folder: Path,
    names: Sequence[str],
    window: int | None,
    *,
    summarize: bool = False,
    own_measure: bool = False,
    answer: int = 2048,
) -> dict[str, Any]:
    @tool
    def read_note(name: str) -> str:
        """Read one note.

        Args:
            name: the note's file name
        """
        return (folder / name).read_text(encoding="utf-8")

    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_note", "arguments": {"name": name}}]} for name in names
    ]
    turns.append({"content": "The open questions, and who raised each: ..."})
    # The notes' writers (`agent/summary-N`) answer with about 250 tokens each.
    notes = {"content": " ".join(f"{WORDS[i % len(WORDS)]}{i}" for i in range(125))}
    kind = OwnCountModel if own_measure else ScriptedModel
    model = kind({"agent": turns, "*": [notes] * len(names)}, context_window=window)
    trace = folder.parent / f"trace-{window or 'unlimited'}-{summarize}-{own_measure}.jsonl"
    agent = Agent(
        model,
        [read_note],
        system=SYSTEM,
        max_steps=len(names) + 5,
        max_output_tokens=answer,
        trace=trace,
        compaction="summarize" if summarize else "mask",
    )
    result = agent.run_sync("Read every note in the folder and list the open questions.")
    events = [event.as_line() for event in read_trace(trace)]
    cache = openai_cache(own_requests(model))
    counter = default_counter()
    sizes = [counter.count_request(r.messages, r.tools) for r in model.requests]
    # Each request against the window as the model counts it (ours, for the scripted model).
    counted = [own_count(r) for r in model.requests] if own_measure else sizes
    asked = [s + r.max_output_tokens for s, r in zip(counted, model.requests, strict=True)]
    writers = [r for r in model.requests if r.agent != "agent"]
    written = openai_cache(writers)
    return {
        "window": window,
        "notes": summarize,
        "own_count": own_measure,
        "status": result.status,
        "calls": len(model.requests),
        "input_tokens": sum(sizes),
        "largest_request": max(sizes),
        "largest_asked": max(asked),
        "over_window": sum(1 for a in asked if window is not None and a > window),
        "least_allowance": min(r.max_output_tokens for r in own_requests(model)),
        "compactions": sum(1 for e in events if e["type"] == "compact"),
        "results_compacted": len(
            {r["index"] for e in events if e["type"] == "compact" for r in e["replaced"]}
        ),
        "cache_read_share": round(
            (cache["read"] + written["read"]) / (cache["input"] + written["input"]), 4
        ),
        "effective_input_tokens": cache["effective"] + written["effective"],
        "wire_input_tokens": cache["input"] + written["input"],
    }


def own_requests(model: ScriptedModel) -> list[ModelRequest]:
    """The requests of the agent itself (not of the writers of its notes)."""
    return [r for r in model.requests if r.agent == "agent"]


class _Encoder:
    """The wire body's tokens, one message at a time: each distinct message is encoded once."""

    def __init__(self) -> None:
        self.counter = default_counter()
        self.known: dict[str, list[int]] = {}

    def tokens(self, body: dict[str, Any]) -> list[int]:
        tokens: list[int] = []
        for part in [*(body.get("tools") or []), *(body.get("messages") or [])]:
            text = json.dumps(part, sort_keys=True, separators=(",", ":"))
            found = self.known.get(text)
            if found is None:
                found = self.known[text] = self.counter.encode(text)
            tokens += found
        return tokens


def openai_cache(requests: Sequence[ModelRequest]) -> dict[str, Any]:
    """Input tokens and what OpenAI's prefix cache serves of them, request after request."""
    encoder = _Encoder()
    options = OpenAIOptions()
    previous: list[int] = []
    total = read = 0
    for request in requests:
        tokens = encoder.tokens(build_body("m", request, options))
        shared = _common_prefix(tokens, previous)
        if shared >= OPENAI_MIN_PREFIX:
            read += OPENAI_MIN_PREFIX + (shared - OPENAI_MIN_PREFIX) // OPENAI_STEP * OPENAI_STEP
        total += len(tokens)
        previous = tokens
    return {
        "input": total,
        "read": read,
        "read_share": round(read / total, 4) if total else 0.0,
        "effective": round(total - read + READ_PRICE * read),
    }


def _common_prefix(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix, by bisection on slice equality (C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def measure(steps: int = 200, window: int = 16_384, answer: int = 2048) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="context-bench-") as folder:
        notes = Path(folder) / "notes"
        names = write_notes(notes, steps)
        return [
            run_agent(notes, names, window, answer=answer),
            run_agent(notes, names, window, summarize=True, answer=answer),
            run_agent(notes, names, window, own_measure=True, answer=answer),
            run_agent(notes, names, None, answer=answer),
        ]


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| window | status | calls | compactions (results cut) | largest request + answer "
        "allowance (of the window) | least answer allowance | input tokens | on the wire | "
        "cached share | effective input |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        window = f"{row['window']:,}" if row["window"] else "unlimited"
        window += ", with notes" if row["notes"] else ""
        window += ", counted its own way" if row["own_count"] else ""
        largest = f"{row['largest_asked']:,}"
        if row["window"]:
            largest += f" ({row['largest_asked'] / row['window']:.1%})"
            over = row["over_window"]
            largest += f", {over} over it" if over else ""
        lines.append(
            f"| {window} | {row['status']} | {row['calls']} | {row['compactions']} "
            f"({row['results_compacted']}) | {largest} | {row['least_allowance']:,} | "
            f"{row['input_tokens']:,} | {row['wire_input_tokens']:,} | "
            f"{row['cache_read_share']:.1%} | {row['effective_input_tokens']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--window", type=int, default=16_384)
    parser.add_argument("--answer", type=int, default=2048, help="the answer allowance asked")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = measure(args.steps, args.window, args.answer)
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
