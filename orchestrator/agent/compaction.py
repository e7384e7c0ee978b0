"""Keeping an agent's conversation inside its model's context window.

When the window is known (models/window.py: a setting, the table of known models, or a
provider's refusal), every request is fitted to it before it is sent (`ContextFit`):

- **The output is cut to the room left.** A request asks for `max_output_tokens`, or for what
  remains of the window once the prompt (messages and tool schemas) is in and a margin
  (`WINDOW_MARGIN` of the window) is kept free, whichever is less; the budget reserves what is
  asked. When not even `MIN_ANSWER_TOKENS` fit, the run ends as `context_full`, naming the
  window, instead of sending a request the provider would refuse.
- **Compaction.** Past `compact_at` of the window (0.8 by default), or when a minimal answer no
  longer fits, the conversation is compacted: tool results (a loaded skill's instructions among
  them) become short stubs that say what they were, oldest first, until the prompt is at most
  half the threshold. Only a result's text changes: every tool call keeps exactly one result,
  in the model's order, and nothing is removed.
- **Retrievable.** What a stub replaced stays in the trace and in the run:
  `read_compacted(message=N)` reads it back, part by part (`CompactedResults`).
- **Notes (optional, `summarize=True`).** The model also writes notes on what is cut: one
  more call, charged to the budget like any, made by a one-step agent of its own
  (`<agent>/summary-<step>` in the trace). The notes ride in the newest stub, and replace the
  previous notes (there is one set at a time, each taking the last into account), so they
  never pile up.
- **The record.** Each compaction is a `compact` trace event: the window, the prompt's tokens
  before and after, and each result replaced (its message index, call id, tool, tokens and
  stub). A resumed run, `rebuild_conversations` and the report read it from there.

The prompt cache: a provider serves a request's prefix from its cache only when it is exactly
a prefix it has seen. The conversation only grows between compactions, so every request reads
the one before it from the cache; a compaction changes an early message, and the request after
it reads only the tools and system prompt. Compacting rarely and in large steps (from the
threshold down to half of it) keeps those misses to one in a long stretch of calls
(bench/context_window.py measures the share).

A provider's own counts may differ from ours (another tokenizer, a chat template). Each reply
that reports its prompt tokens calibrates our count: `calibrated` is the model's ratio of its
count to ours at its latest reply (`TokenCounter.prompt_ratio`, shared by the agents of one
model, never below 1), and every request is fitted in that measure. When a provider still
refuses a request we thought fitted, and its refusal names its count of the prompt, `scale`
(its tokens per counted token) makes later fitting use its measure; a refusal that names no
count raises the ratio by at least 15%. Either way the request is compacted and sent again,
up to `MAX_REFUSALS` times. The larger of `scale` and `calibrated` is the one used (`ratio`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ContextWindowExceeded, ToolError
from ..messages import Message
from ..tokens import TokenCounter
from .tools import Tool, ToolContext

DEFAULT_COMPACT_AT = 0.8
MIN_ANSWER_TOKENS = 128
WINDOW_MARGIN = 0.03
SCALE_MARGIN = 1.05
UNCOUNTED_MARGIN = 1.15
MAX_REFUSALS = 3
PART_CHARS = 8_000
STUB_MARK = "[compacted]"
STUB = STUB_MARK + " {tool} result, {tokens:,} tokens: read_compacted(message={index})"
SUMMARY_MARK = "\n[notes on the results compacted so far]\n"
SUMMARY_TOKENS = 512
SUMMARY_SYSTEM = (
    "You keep notes for an agent whose conversation is being shortened to fit its context "
    "window. You are given its task, the notes kept so far, and tool results that are about "
    "to be cut from its conversation. Write the notes the agent needs from now on: facts, "
    "figures, names, file paths, decisions and open questions, each with the message number "
    "it came from. Keep every point of the earlier notes that still matters. Plain text, at "
    "most 300 words, no preamble."
)


@dataclass
class ContextFit:
    """What one run knows of its model's context window, and how it fits each request in it.

    `window` is None while unknown. `scale` is the provider's tokens per token of ours,
    learned from a refusal (1 until then); `calibrated`, the same ratio at the model's
    latest reply.
    """

    window: int | None
    source: str | None = None
    compact_at: float = DEFAULT_COMPACT_AT
    scale: float = 1.0
    calibrated: float = 1.0
    compactions: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.compact_at <= 1:
            raise ValueError(f"compact_at must be in (0, 1], got {self.compact_at}")

    @property
    def ratio(self) -> float:
        """The provider's tokens per token of ours, as fitting uses it."""
        return max(self.scale, self.calibrated)

    @property
    def margin(self) -> int:
        """Tokens of the window kept free: what a count in the provider's measure may still
        miss (the request's newest part, which no reply has measured yet)."""
        return 0 if self.window is None else math.ceil(self.window * WINDOW_MARGIN)

    def provider_tokens(self, counted: int) -> int:
        """Our count of a prompt in the provider's measure."""
        return math.ceil(counted * self.ratio)

    def room(self, counted: int) -> int | None:
        """Tokens left for the reply after a prompt of `counted` tokens, the margin kept;
        None: no known window."""
        if self.window is None:
            return None
        return self.window - self.margin - self.provider_tokens(counted)

    def needs_compaction(self, counted: int) -> bool:
        if self.window is None:
            return False
        prompt = self.provider_tokens(counted)
        full = prompt + MIN_ANSWER_TOKENS + self.margin > self.window
        return prompt > self.compact_at * self.window or full

    def excess(self, counted: int) -> int:
        """Counted tokens to cut to bring a prompt down to half the threshold."""
        assert self.window is not None
        target = self.compact_at * self.window / 2 / self.ratio
        return max(0, math.ceil(counted - target))

    def needed(self, counted: int) -> int:
        """Counted tokens a prompt must lose for a minimal answer to fit at all."""
        assert self.window is not None
        limit = (self.window - self.margin - MIN_ANSWER_TOKENS) / self.ratio
        return max(0, math.ceil(counted - limit))

    def learn(self, refusal: ContextWindowExceeded, counted: int, asked: int) -> bool:
        """Take what a provider's refusal of a prompt of `counted` tokens (ours) with `asked`
        output tokens says of the window and of its counts; True when it taught something
        new, worth compacting and trying again."""
        learned = False
        if refusal.window is not None and refusal.window != self.window:
            self.window, self.source, learned = refusal.window, "refusal", True
        if refusal.prompt_tokens is not None and counted > 0:
            scale = refusal.prompt_tokens / counted * SCALE_MARGIN
            if scale > self.ratio:
                self.scale, learned = scale, True
        if not learned and self.window is not None and counted > 0:
            # Refused within a window we knew, without the provider's count: ours fell short,
            # and the prompt it counted was more than the window less what we asked.
            least = (self.window - asked) / counted * SCALE_MARGIN
            self.scale, learned = max(self.ratio * UNCOUNTED_MARGIN, least), True
        return learned and self.window is not None

    def describe(self) -> str:
        """The window as errors name it: `the context window of 8,192 tokens (from its
        setting)`."""
        where = {
            "setting": "its setting",
            "known model": "the table of known models",
            "server": "the server",
        }.get(self.source or "", "the provider's refusal")
        return f"the context window of {self.window:,} tokens (from {where})"


@dataclass(frozen=True)
class Replaced:
    """One tool result a compaction replaced with a stub."""

    index: int
    call_id: str
    tool: str
    tokens: int
    stub: str

    def record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "call_id": self.call_id,
            "tool": self.tool,
            "tokens": self.tokens,
            "stub": self.stub,
        }


@dataclass
class Compaction:
    """A conversation with some tool results replaced by stubs, and what each one was."""

    messages: list[Message]
    replaced: list[Replaced]
    originals: dict[int, str]

    @property
    def saved(self) -> int:
        return sum(r.tokens for r in self.replaced)


def compact(
    messages: Sequence[Message], counter: TokenCounter, *, excess: int, needed: int = 0
) -> Compaction:
    """Replace tool results with stubs, oldest first, until `excess` counted tokens are gone
    (or none is left to replace). The results of the latest turn, which the model has not
    read yet, are replaced only as far as `needed` (what the request must lose to fit at all)
    asks. Stubs are never replaced again."""
    kept = list(messages)
    replaced: list[Replaced] = []
    originals: dict[int, str] = {}
    saved = 0
    latest = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    for index, message in enumerate(messages):
        if saved >= (excess if index < latest else needed):
            continue
        if message.role != "tool" or is_stub(message):
            continue
        tokens = counter.count_message(message)
        stub = STUB.format(tool=message.name or "tool", tokens=tokens, index=index)
        shrunk = message.model_copy(update={"content": stub})
        gain = tokens - counter.count_message(shrunk)
        if gain <= 0:
            continue
        kept[index] = shrunk
        saved += gain
        originals[index] = message.content or ""
        replaced.append(
            Replaced(index, message.tool_call_id or "", message.name or "", tokens, stub)
        )
    return Compaction(kept, replaced, originals)


def summary_of(messages: Sequence[Message]) -> tuple[int, str] | None:
    """Where the conversation's summary is (a stub that carries one), and its text."""
    for index, message in enumerate(messages):
        content = message.content or ""
        if message.role == "tool" and is_stub(message) and SUMMARY_MARK in content:
            return index, content.split(SUMMARY_MARK, 1)[1]
    return None


def summary_task(
    messages: Sequence[Message], done: Compaction, counter: TokenCounter, limit: int
) -> str:
    """What the summarizer reads: the agent's task, the summary so far, and the results this
    compaction cuts, at most `limit` tokens of it."""
    task = next((m.content or "" for m in messages if m.role == "user"), "")
    earlier = summary_of(messages)
    parts = [
        f"The agent's task:\n{task}",
        f"The notes kept so far:\n{earlier[1] if earlier else '(none)'}",
        "The tool results being cut:",
        *(f"--- {r.tool} (message {r.index})\n{done.originals[r.index]}" for r in done.replaced),
    ]
    text, _ = counter.truncate("\n\n".join(parts), limit)
    return text


def with_summary(done: Compaction, summary: str, counter: TokenCounter) -> Compaction:
    """`done` with `summary` in its newest stub, and the summary before it (there is one at a
    time) back to its plain stub."""
    messages = list(done.messages)
    replaced = list(done.replaced)
    newest = replaced[-1]
    stub = f"{newest.stub}{SUMMARY_MARK}{summary}"
    messages[newest.index] = messages[newest.index].model_copy(update={"content": stub})
    replaced[-1] = Replaced(newest.index, newest.call_id, newest.tool, newest.tokens, stub)
    earlier = summary_of(done.messages)
    if earlier is not None:
        index, old = earlier[0], messages[earlier[0]]
        plain = (old.content or "").split(SUMMARY_MARK, 1)[0]
        messages[index] = old.model_copy(update={"content": plain})
        tokens = counter.count_message(old)
        replaced.append(Replaced(index, old.tool_call_id or "", old.name or "", tokens, plain))
    return Compaction(messages, sorted(replaced, key=lambda r: r.index), done.originals)


def is_stub(message: Message) -> bool:
    return (message.content or "").startswith(STUB_MARK)


@dataclass
class CompactedResults:
    """What one run's compactions cut, by message index (`ctx.state_of(CompactedResults)`)."""

    originals: dict[int, str] = field(default_factory=dict)


def read_compacted(message: int, ctx: ToolContext, part: int = 1) -> str:
    """Read back a tool result that was compacted out of the conversation.

    Args:
        message: the number the stub gives (`read_compacted(message=N)`)
        part: long results come back in parts; 1 is the first
    """
    originals = ctx.state_of(CompactedResults).originals
    if message not in originals:
        known = ", ".join(str(i) for i in sorted(originals)) or "none yet"
        raise ToolError(f"No compacted result {message}. Compacted so far: {known}.")
    text = originals[message]
    parts = max(1, math.ceil(len(text) / PART_CHARS))
    if not 1 <= part <= parts:
        raise ToolError(f"Result {message} has {parts} part(s); ask for part 1 to {parts}.")
    piece = text[(part - 1) * PART_CHARS : part * PART_CHARS]
    if parts == 1:
        return piece
    more = (
        f"; read_compacted(message={message}, part={part + 1}) for the next" if part < parts else ""
    )
    return f"{piece}\n[part {part} of {parts}{more}]"


READ_COMPACTED = Tool(read_compacted, name="read_compacted", resumable=True)
