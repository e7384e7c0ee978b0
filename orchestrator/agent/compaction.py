"""Keeping an agent's conversation inside its model's context window.

When the window is known (models/window.py: a setting, the table of known models, or a
provider's refusal), every request is fitted to it before it is sent (`ContextFit`):

- **The output is cut to the room left.** A request asks for `max_output_tokens`, or for what
  remains of the window once the prompt (messages and tool schemas) is in and a margin
  (`WINDOW_MARGIN` of the window) is kept free, whichever is less; the budget reserves what is
  asked. So the prompt and the answer allowance together never pass the window. When not even
  `MIN_ANSWER_TOKENS` fit, the run ends as `context_full`, naming the window, instead of
  sending a request the provider would refuse.
- **Compaction.** Past `compact_at` of the window (0.8 by default), or when a minimal answer no
  longer fits, the conversation is compacted, before the answer allowance is cut any further:
  so a request asks for at least what the threshold leaves (`window - margin - threshold`)
  unless what is never cut takes more. Tool results become short stubs that say what
  they were, oldest first, until the prompt is at most half the threshold. Only a result's
  text changes: every tool call keeps exactly one result, in the model's order, and nothing is
  removed. Never cut: the system prompt, user messages (a job's pins ride in the task), the
  model's turns, pinned results (`Tool(pin=True)`: a skill's instructions from `load_skill`),
  and the latest turn's results unless the request cannot fit without them (an unread
  `read_compacted` answer never). When that alone fills the window, the run ends as
  `context_full`, saying what takes it (`never_cut`).
- **Strategies** (`CompactionStrategy`, per agent): `mask` (the stubs); `summarize` (the
  same, and one more call, charged to the budget like any, made by a one-step agent of its
  own, `<agent>/summary-<step>`, writes a structured summary of what is cut); or an
  extension's own plan (`Extension.compact`: a `CompactionRequest` in, a `CompactionPlan` of
  candidates to cut out).
- **The working record** (`WorkingRecord`, kept with the `note` tool, with the files the run's
  tools changed) and the summary ride in the newest stub (`CARRY_MARK`), one copy at a time,
  so they survive every cut.
- **Retrievable.** What a stub replaced stays in the trace and in the run:
  `read_compacted(message=N)` reads it back, in parts no larger than what a compaction leaves
  (`CompactedResults`).
- **The record.** Each compaction is a `compact` trace event: the window, the prompt's tokens
  before and after, and each result replaced (its message index, call id, tool, tokens and
  stub). A resumed run, `rebuild_conversations` and the report read it from there.

The prompt cache: a provider serves a request's prefix from its cache only when it is exactly
a prefix it has seen. The conversation only grows between compactions, so every request reads
the one before it from the cache; a compaction changes an early message, and the request after
it reads only the tools and system prompt. Compacting rarely and in large steps (from the
threshold down to half of it) keeps those misses to one in a long stretch of calls
(bench/context_window.py measures the share).

A provider's own counts may differ from ours (another tokenizer, a chat template), and every
request is fitted in the provider's measure:

- **by ratio**, until a reply of this agent has said its count: each reply that reports its
  prompt tokens calibrates our count, `calibrated` being the model's ratio of its count to
  ours at its latest reply (`TokenCounter.prompt_ratio`, shared by the agents of one model,
  never below 1);
- **by measure** after that (`PromptMeasure`): the request the reply answered is known
  message by message in the provider's count, and the next one is counted as that one, less
  what it changed of it, plus what it added at what the latest turn's additions cost.

A ratio of the whole request goes wrong right after a compaction: measured on a conversation
of tool results, it is applied to one of mostly what is never cut (turns, stubs,
instructions), which a provider may count otherwise; the measure takes the cut results out at
what they were counted. Either way a request is never counted below our own count. When a
provider still refuses a request we thought fitted, and its refusal names its count of the
prompt, `scale` (its tokens per counted token) makes later fitting use its measure; a refusal
that names no count raises the ratio by at least 15%. Either way the request is compacted and
sent again, up to `MAX_REFUSALS` times. The larger of `scale` and `calibrated` is the one
used (`ratio`), and `scale` bounds a measured count from below too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..errors import ContextWindowExceeded, ToolError
from ..events import FILES_LISTED, CompactedResult, Note
from ..messages import Message, ToolCall
from ..tokens import TokenCounter
from .tools import Tool, ToolContext, Toolset, unwrap

DEFAULT_COMPACT_AT = 0.8
MIN_ANSWER_TOKENS = 128
WINDOW_MARGIN = 0.03
SCALE_MARGIN = 1.05
UNCOUNTED_MARGIN = 1.15
MAX_REFUSALS = 3
PART_CHARS = 8_000
STUB_MARK = "[compacted]"
STUB = STUB_MARK + " {tool} result, {tokens:,} tokens: read_compacted(message={index})"
CARRY_MARK = "\n[kept across compactions]\n"
RECORD_HEADING = "Working record (kept with `note`):"
FILES_HEADING = "Files this run changed:"
SUMMARY_HEADING = "Summary of the results compacted so far:"
SUMMARY_TOKENS = 512
SUMMARY_SYSTEM = (
    "You keep a summary for an agent whose conversation is being shortened to fit its context "
    "window. You are given its task, what was kept so far, and tool results that are about to "
    "be cut from its conversation. Write the summary the agent needs from now on, under these "
    "four headings, each point with the message number it came from:\n"
    "Decisions: what is settled, with the facts, figures and names it rests on.\n"
    "Dead ends: what was tried and failed, and why, so it is not tried again.\n"
    "Artifacts: files, paths, ids and results produced or changed.\n"
    "Next step: what remains to do.\n"
    "Keep every point of the earlier summary that still matters. Plain text, at most 300 "
    "words, no preamble."
)
NOTE_CHARS = 2_000
MIN_PART_TOKENS = 64
CompactionStrategy = Literal["mask", "summarize"]
"""How an agent compacts: `mask` (tool results become stubs, oldest first) or `summarize`
(the same, and a model call writes a structured summary of what is cut). A compactor of
one's own is an extension (`Extension.compact`)."""
COMPACTION_STRATEGIES: tuple[str, ...] = get_args(CompactionStrategy)


@dataclass(slots=True)
class PromptMeasure:
    """The provider's own count of one agent's prompts, message by message.

    A reply that reports its prompt tokens measures the request it answered (`take`). The
    first request's tokens are shared among its messages (and its tool schemas) by ratio;
    after that, when the conversation only grew, what it added (the model's turn and the
    results of its calls, and tools added) shares the difference of the two counts in
    proportion to our counts of it, and that cost per token is kept (`appended`). What a
    compaction rewrote is taken at that cost, and what the cut results' shares missed stays
    in the whole count, never in a message a later cut would take out again. So each message
    sent carries about what the provider counted for it. A request is counted (`estimate`) as
    the last one measured, less what it changed of it, plus its changes at `appended`. One per
    run (`ContextFit.measure`).
    """

    messages: list[Message] = field(default_factory=list)
    """The request measured last, as it was sent."""
    shares: list[float] = field(default_factory=list)
    """The provider's tokens of each of its messages."""
    tokens: int = 0
    """The provider's count of that request."""
    tools: int = 0
    """Our count of its tool schemas."""
    compactions: int | None = None
    """How many compactions the run had made when it was sent (None: nothing measured)."""
    appended: float = 1.0
    """The provider's tokens per token of ours of what the latest turn added (a call and its
    results): what the next turn's will likely cost."""

    def _changed(self, messages: Sequence[Message], compactions: int) -> list[int]:
        """The messages of a request that the measured one did not send as they are."""
        kept = len(self.messages)
        if (
            compactions == self.compactions
            and len(messages) >= kept
            and (kept == 0 or messages[kept - 1] is self.messages[-1])
        ):
            return list(range(kept, len(messages)))  # the conversation only grew
        return [i for i, m in enumerate(messages) if i >= kept or m is not self.messages[i]]

    def _removed(self, messages: Sequence[Message], changed: Sequence[int]) -> float:
        """The provider's tokens of the measured messages that a request no longer sends."""
        kept = len(self.shares)
        gone = sum(self.shares[i] for i in changed if i < kept)
        return gone + sum(self.shares[len(messages) :])

    def estimate(
        self,
        messages: Sequence[Message],
        tools: int,
        counter: TokenCounter,
        compactions: int,
    ) -> float | None:
        """A request's prompt in the provider's measure (None: nothing measured yet)."""
        if self.compactions is None:
            return None
        changed = self._changed(messages, compactions)
        added = sum(counter.message_tokens(messages, i) for i in changed) + tools - self.tools
        return self.tokens - self._removed(messages, changed) + self.appended * added

    def take(
        self,
        messages: Sequence[Message],
        tools: int,
        counted: int,
        reported: int,
        counter: TokenCounter,
        compactions: int,
    ) -> None:
        """Take the provider's count (`reported`) of a request of `counted` tokens (ours)."""
        overall = reported / counted if counted > 0 else 1.0
        kept = len(self.messages)
        if self.compactions is None:
            changed, per_token = list(range(len(messages))), overall
            self.appended = overall
        else:
            changed = self._changed(messages, compactions)
            grown = changed == list(range(kept, len(messages)))
            weight = sum(counter.message_tokens(messages, i) for i in changed)
            weight += max(0, tools - self.tools)
            delta = reported - self.tokens + self._removed(messages, changed)
            if grown and weight > 0 and delta > 0:
                # What the turn added costs the difference of the two counts.
                per_token = self.appended = delta / weight
            else:
                # A compaction's changes (or a provider that counts less for more) take what
                # an added turn costs; what the cut results' shares missed stays in the whole
                # (`tokens`), never in a message that a later cut would take out again.
                per_token = self.appended
        if changed == list(range(kept, len(messages))):
            self.messages.extend(messages[kept:])
        else:
            self.messages = list(messages)
            del self.shares[len(messages) :]
        self.shares.extend([0.0] * (len(messages) - len(self.shares)))
        for i in changed:
            self.shares[i] = per_token * counter.message_tokens(messages, i)
        self.tokens, self.tools, self.compactions = reported, tools, compactions

    def cost_of(
        self, messages: Sequence[Message], indices: Sequence[int], counter: TokenCounter
    ) -> float | None:
        """The provider's tokens per token of ours of the messages at `indices`, as measured
        (None: none of them was)."""
        ours = theirs = 0.0
        for i in indices:
            if i < len(self.messages) and messages[i] is self.messages[i]:
                ours += counter.message_tokens(messages, i)
                theirs += self.shares[i]
        return theirs / ours if ours > 0 and theirs > 0 else None


def check_compact_at(compact_at: float) -> None:
    """Refuse a compaction threshold that is not a share of a window, in (0, 1]."""
    if not 0 < compact_at <= 1:
        raise ValueError(f"compact_at must be in (0, 1], got {compact_at}")


@dataclass(slots=True)
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
    measure: PromptMeasure = field(default_factory=PromptMeasure)

    def __post_init__(self) -> None:
        check_compact_at(self.compact_at)

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
        """Our count of a prompt in the provider's measure, by ratio alone."""
        return math.ceil(counted * self.ratio)

    def prompt(
        self,
        messages: Sequence[Message],
        tools: int,
        counted: int,
        counter: TokenCounter,
    ) -> int:
        """A request's prompt in the provider's measure: `messages`, with tool schemas of
        `tools` tokens (ours), `counted` tokens in all (ours). From what the provider's replies
        measured (`PromptMeasure`) when they did, else by ratio; never below our count (nor
        what a refusal taught, `scale`)."""
        return self._larger(counted, self.measured(messages, tools, counter))

    def measured(
        self, messages: Sequence[Message], tools: int, counter: TokenCounter
    ) -> float | None:
        """A request's prompt as the provider's replies measured it (None: none did)."""
        return self.measure.estimate(messages, tools, counter, self.compactions)

    def _larger(self, counted: int, measured: float | None) -> int:
        if measured is None:
            return self.provider_tokens(counted)
        return max(math.ceil(measured), math.ceil(counted * self.scale))

    def room(self, prompt: int) -> int | None:
        """Tokens left for the reply after a prompt of `prompt` tokens (the provider's
        measure), the margin kept; None: no known window."""
        if self.window is None:
            return None
        return self.window - self.margin - prompt

    def needs_compaction(self, prompt: int) -> bool:
        """Whether a prompt of `prompt` tokens (the provider's measure) is past the threshold,
        or leaves no room for a minimal answer."""
        if self.window is None:
            return False
        full = prompt + MIN_ANSWER_TOKENS + self.margin > self.window
        return prompt > self.compact_at * self.window or full

    def excess(self, counted: int, measured: float | None, per_token: float) -> int:
        """Counted tokens to cut to bring a prompt (`counted` tokens of ours, `measured` in
        the provider's measure) down to half the threshold, when what is cut costs the
        provider `per_token` tokens per token of ours."""
        assert self.window is not None
        return self._to_cut(self.compact_at * self.window / 2, counted, measured, per_token)

    def needed(self, counted: int, measured: float | None, per_token: float) -> int:
        """Counted tokens a prompt must lose for a minimal answer to fit at all (the
        arguments as for `excess`)."""
        assert self.window is not None
        limit = self.window - self.margin - MIN_ANSWER_TOKENS
        return self._to_cut(limit, counted, measured, per_token)

    def _to_cut(self, target: float, counted: int, measured: float | None, per_token: float) -> int:
        """Counted tokens to cut for the prompt (`_larger` of the two counts) to be at most
        `target`: both counts must come down to it."""
        if measured is None:
            return max(0, math.ceil(counted - target / self.ratio))
        by_count = counted - target / self.scale
        by_measure = (measured - target) / per_token
        return max(0, math.ceil(max(by_count, by_measure)))

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

    def record(self) -> CompactedResult:
        return CompactedResult(
            index=self.index,
            call_id=self.call_id,
            tool=self.tool,
            tokens=self.tokens,
            stub=self.stub,
        )


@dataclass
class Compaction:
    """A conversation with some tool results replaced by stubs, and what each one was."""

    messages: list[Message]
    replaced: list[Replaced]
    originals: dict[int, str]

    @property
    def saved(self) -> int:
        return sum(r.tokens for r in self.replaced)


@dataclass(frozen=True)
class CompactionRequest:
    """What a compactor decides on (`Extension.compact`): the conversation as the next
    request would send it, and the tool results it may cut.

    `candidates` are the indices of the results that may become stubs, oldest first: never the
    system prompt, a user's message, the model's own turns, a pinned result (a skill's
    instructions among them), a stub, a `read_compacted` answer the model has not read yet,
    nor (unless the request cannot fit without it, `needed`) any other result of the latest
    turn. `tokens` counts each candidate. Cutting `excess` counted tokens brings the prompt down
    to half the threshold (what `mask` aims at); the request fits at all only once `needed`
    are gone. `record` is the working record the newest stub will carry (empty without one).
    """

    messages: tuple[Message, ...]
    candidates: tuple[int, ...]
    tokens: Mapping[int, int]
    excess: int
    needed: int
    window: int
    record: str = ""


@dataclass(frozen=True)
class CompactionPlan:
    """A compactor's decision: which candidates become stubs (`cut`, by message index), and
    a `summary` of them for the newest stub to carry (None: none). Only a result's text
    changes, so every call keeps its one result, and the cut text stays retrievable with
    `read_compacted`."""

    cut: Sequence[int]
    summary: str | None = None


def compaction_request(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    excess: int,
    needed: int,
    window: int,
    record: str = "",
) -> CompactionRequest:
    """The request a compactor of one's own gets (counting only the candidates)."""
    candidates = tuple(cuttable(messages, needed))
    tokens = {i: counter.count_message(messages[i]) for i in candidates}
    return CompactionRequest(tuple(messages), candidates, tokens, excess, needed, window, record)


def cuttable(messages: Sequence[Message], needed: int) -> list[int]:
    """The tool results a compaction may cut, oldest first (see `CompactionRequest`)."""
    latest = _latest_turn(messages)
    return [
        index
        for index, message in enumerate(messages)
        if message.role == "tool"
        and not message.pinned
        and not is_stub(message)
        and not (index > latest and (message.name == READ_COMPACTED_NAME or needed <= 0))
    ]


def _latest_turn(messages: Sequence[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)


def compact(
    messages: Sequence[Message],
    counter: TokenCounter,
    *,
    excess: int,
    needed: int = 0,
    chosen: Sequence[int] | None = None,
) -> Compaction:
    """Replace tool results with stubs, oldest first, until `excess` counted tokens are gone
    (or none is left to replace); or exactly the results `chosen` (a compactor's plan), each
    of which must be a candidate (`cuttable`). The results of the latest turn, which the model
    has not read yet, are replaced only as far as `needed` (what the request must lose to fit
    at all) asks, and a `read_compacted` answer among them never. Pinned results and stubs are
    never replaced. Raises ValueError when `chosen` names a message that may not be cut."""
    kept = list(messages)
    replaced: list[Replaced] = []
    originals: dict[int, str] = {}
    saved = 0
    latest = _latest_turn(messages)
    candidates = cuttable(messages, needed)
    if chosen is not None:
        refused = sorted(set(chosen) - set(candidates))
        if refused:
            raise ValueError(
                "a compaction plan may cut only the request's candidates (tool results not "
                "pinned, not stubs, not unread unless the request cannot fit without them); "
                f"it named message(s) {refused}"
            )
    for index in sorted(set(chosen)) if chosen is not None else candidates:
        if chosen is None and saved >= (excess if index < latest else needed):
            continue
        message = messages[index]
        tokens = counter.count_message(message)
        stub = STUB.format(tool=message.name or "tool", tokens=tokens, index=index)
        shrunk = message.as_stub(stub)
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


def never_cut(messages: Sequence[Message], counter: TokenCounter) -> dict[str, int]:
    """What no compaction can cut, counted by kind (for the error a run ends with when that
    alone fills the window): the system prompt, the user's messages (the task, with what a
    job pins), the model's turns, pinned results and stubs."""
    kinds: dict[str, int] = {}
    for message in messages:
        if message.role == "tool":
            kind = "pinned results" if message.pinned else "stubs" if is_stub(message) else ""
        else:
            kind = {"system": "system prompt", "user": "task and user messages"}.get(
                message.role, "the model's turns"
            )
        if kind:
            kinds[kind] = kinds.get(kind, 0) + counter.count_message(message)
    return kinds


def carried_of(messages: Sequence[Message]) -> tuple[int, str] | None:
    """Where the conversation's carried block is (in a stub), and its text: the working
    record and the summary, kept across compactions."""
    for index, message in enumerate(messages):
        content = message.content or ""
        if message.role == "tool" and is_stub(message) and CARRY_MARK in content:
            return index, content.split(CARRY_MARK, 1)[1]
    return None


def without_summary(messages: Sequence[Message], counter: TokenCounter) -> Compaction | None:
    """The conversation with its carried block's summary taken out (the working record
    stays), as a compaction of the one stub that carries it; None when no summary is
    carried."""
    found = carried_of(messages)
    if found is None or SUMMARY_HEADING not in found[1]:
        return None
    index, block = found
    record = block.split(SUMMARY_HEADING, 1)[0].strip()
    message = messages[index]
    stub = (message.content or "").split(CARRY_MARK, 1)[0]
    content = f"{stub}{CARRY_MARK}{record}" if record else stub
    changed = list(messages)
    changed[index] = message.model_copy(update={"content": content})
    tokens = counter.count_message(message)
    replaced = Replaced(index, message.tool_call_id or "", message.name or "", tokens, content)
    return Compaction(changed, [replaced], {})


def summary_task(
    messages: Sequence[Message], done: Compaction, counter: TokenCounter, limit: int
) -> str:
    """What the summarizer reads: the agent's task, what was carried so far, and the results
    this compaction cuts, at most `limit` tokens of it."""
    task = next((m.content or "" for m in messages if m.role == "user"), "")
    earlier = carried_of(messages)
    parts = [
        f"The agent's task:\n{task}",
        f"Kept so far:\n{earlier[1] if earlier else '(nothing)'}",
        "The tool results being cut:",
        *(f"--- {r.tool} (message {r.index})\n{done.originals[r.index]}" for r in done.replaced),
    ]
    text, _ = counter.truncate("\n\n".join(parts), limit)
    return text


def carried_block(record: str, summary: str | None) -> str:
    """What the newest stub carries: the working record and the summary, either may be
    missing ("" when both are)."""
    parts = [record] if record else []
    if summary:
        parts.append(f"{SUMMARY_HEADING}\n{summary}")
    return "\n\n".join(parts)


def with_carried(done: Compaction, carried: str, counter: TokenCounter) -> Compaction:
    """`done` with `carried` in its newest stub, and the block carried before it (there is one
    at a time) taken out of its stub, which becomes plain again."""
    if not carried or not done.replaced:
        return done
    messages = list(done.messages)
    replaced = list(done.replaced)
    newest = max(replaced, key=lambda r: r.index)
    stub = f"{newest.stub}{CARRY_MARK}{carried}"
    messages[newest.index] = messages[newest.index].model_copy(update={"content": stub})
    replaced[replaced.index(newest)] = Replaced(
        newest.index, newest.call_id, newest.tool, newest.tokens, stub
    )
    earlier = carried_of(done.messages)
    if earlier is not None and earlier[0] != newest.index:
        index, old = earlier[0], messages[earlier[0]]
        plain = (old.content or "").split(CARRY_MARK, 1)[0]
        messages[index] = old.model_copy(update={"content": plain})
        tokens = counter.count_message(old)
        replaced.append(Replaced(index, old.tool_call_id or "", old.name or "", tokens, plain))
    return Compaction(messages, sorted(replaced, key=lambda r: r.index), done.originals)


def is_stub(message: Message) -> bool:
    """Whether a compaction put `message` in place of a tool result: by its mark, never by
    its text (a page or a file may begin with `[compacted]`)."""
    return message.compacted


@dataclass
class WorkingRecord:
    """One run's working record (`ctx.state_of(WorkingRecord)`): the agent's note, kept with
    the `note` tool, and the files the run's tools changed (a tool's `changes`), listed by
    themselves: the newest `FILES_LISTED` (events.py), the older ones counted. Each
    compaction carries it in the newest stub, so it survives every cut."""

    note: str = ""
    files: list[str] = field(default_factory=list)
    """The newest files changed, oldest first; at most `FILES_LISTED`."""
    limit: int = NOTE_CHARS
    _changed: set[str] = field(default_factory=set)

    def changed(self, path: str) -> bool:
        """Record that the run changed `path`; whether it is a file not recorded before."""
        if path in self._changed:
            return False
        self._changed.add(path)
        self.files.append(path)
        del self.files[:-FILES_LISTED]
        return True

    @property
    def files_changed(self) -> int:
        """How many files the run changed, listed or not."""
        return len(self._changed)

    def render(self) -> str:
        """The record as the agent reads it ("" when empty)."""
        parts = [f"{RECORD_HEADING}\n{self.note}"] if self.note else []
        if self.files:
            earlier = self.files_changed - len(self.files)
            more = f" (and {earlier:,} changed earlier, not listed)" if earlier else ""
            parts.append(f"{FILES_HEADING} {', '.join(self.files)}{more}")
        return "\n".join(parts)


def note(text: str, ctx: ToolContext) -> str:
    """Keep your working record: it stays in your context when older tool results are cut to
    fit the context window. Write it whole each time (it replaces the last one): settled
    decisions, dead ends (what failed, and why), files changed, open questions.

    Args:
        text: the whole record, short
    """
    record = ctx.state_of(WorkingRecord)
    if len(text) > record.limit:
        raise ToolError(
            f"The note has {len(text):,} characters, more than the {record.limit:,} it may "
            "hold: shorten it and call note again (the previous note is kept)."
        )
    record.note = text
    ctx.trace.emit(
        Note,
        agent=ctx.agent,
        text=text,
        files=list(record.files),
        files_changed=record.files_changed,
    )
    return f"Kept.\n{record.render()}"


NOTE = Tool(note, name="note")


def restore_record(record: WorkingRecord, messages: Sequence[Message], toolset: Toolset) -> None:
    """Give a resumed run its working record back from its conversation: the latest note the
    agent kept and the files its calls changed (the model's turns are never cut, and a call's
    result keeps whether it failed)."""
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.is_error}
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    for message in messages:
        for call in message.tool_calls:
            if call.id in failed or call.id not in answered:
                continue
            unwrapped = unwrap(call, toolset)
            found = None if unwrapped.error else toolset.get(unwrapped.call.name)
            if found is None or (found.changes is None and found.name != NOTE.name):
                continue
            arguments = _arguments(unwrapped.call)
            if found.name == NOTE.name and isinstance(arguments.get("text"), str):
                record.note = arguments["text"]
            elif found.changes is not None and isinstance(arguments.get(found.changes), str):
                record.changed(arguments[found.changes])


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class CompactedResults:
    """What one run's compactions cut, by message index (`ctx.state_of(CompactedResults)`),
    and how many tokens one part read back may hold (None: no window known)."""

    originals: dict[int, str] = field(default_factory=dict)
    part_tokens: int | None = None
    counter: TokenCounter | None = None


def read_compacted(message: int, ctx: ToolContext, part: int = 1) -> str:
    """Read back a tool result that was compacted out of the conversation.

    Args:
        message: the number the stub gives (`read_compacted(message=N)`)
        part: long results come back in parts; 1 is the first
    """
    state = ctx.state_of(CompactedResults)
    originals = state.originals
    if message not in originals:
        known = ", ".join(str(i) for i in sorted(originals)) or "none yet"
        raise ToolError(f"No compacted result {message}. Compacted so far: {known}.")
    text = originals[message]
    size = PART_CHARS
    if state.part_tokens is not None and state.counter is not None:
        if state.part_tokens < MIN_PART_TOKENS:
            raise ToolError(
                f"Result {message} cannot be read back here: this agent's context window "
                f"leaves about {max(0, state.part_tokens)} tokens for a part read back, fewer "
                f"than the {MIN_PART_TOKENS} one part needs. A model with a larger window "
                "(`context_window`) can read it."
            )
        tokens = state.counter.count_text(text)
        if tokens > state.part_tokens:
            size = max(1, min(PART_CHARS, len(text) * state.part_tokens // tokens))
    parts = max(1, math.ceil(len(text) / size))
    if not 1 <= part <= parts:
        raise ToolError(f"Result {message} has {parts} part(s); ask for part 1 to {parts}.")
    piece = text[(part - 1) * size : part * size]
    if parts == 1:
        return piece
    more = (
        f"; read_compacted(message={message}, part={part + 1}) for the next" if part < parts else ""
    )
    return f"{piece}\n[part {part} of {parts}{more}]"


READ_COMPACTED_NAME = "read_compacted"
READ_COMPACTED = Tool(read_compacted, name=READ_COMPACTED_NAME, resumable=True)
