"""The providers' published prompt-cache rules, applied to the wire requests a job sent.

Given the request bodies in the order they were sent, this says how many input tokens each
provider would have served from its cache, written to it, and billed in full; and what that
comes to in "effective input tokens" (cached reads at 0.1x, cache writes at 1.25x, the rest 1x).

**Anthropic** (Messages, `cache_control`): nothing is cached without breakpoints. The prefix
runs tools, then system, then messages, block by block; `tool_choice` is part of the messages'
prefix (changing it invalidates the cached messages, not tools or system). A request reads
the longest prefix that an earlier request wrote, found by looking at each of its breakpoints
and up to 20 blocks before each. It writes the prefix ending at each of its breakpoints. A
prefix shorter than the model's minimum (1,024 tokens for Sonnet and Opus) is never cached.

**OpenAI** (Chat Completions): automatic. A request reads the longest prefix it shares with an
earlier request, counted in whole tokens: at least 1,024, then in steps of 128. The tools
array comes before the messages, so a changed tools array breaks the prefix.

A request's writes are readable only by requests sent after it was answered (`timing`: when each
request was sent and answered; without it, each request is answered before the next is sent):
sibling sub-agents whose first requests go out together all miss.

Token counts use the offline cl100k encoding over each block's JSON: an approximation of each
provider's own tokenizer, but the same one for every framework measured.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.tokens import default_counter

ANTHROPIC_MIN_PREFIX = 1024
ANTHROPIC_LOOKBACK = 20
OPENAI_MIN_PREFIX = 1024
OPENAI_STEP = 128
READ_PRICE = 0.1
WRITE_PRICE = 1.25


@dataclass
class CacheTally:
    """Input tokens of a sequence of requests, by how a provider's cache would serve them."""

    requests: int = 0
    input_tokens: int = 0
    read_tokens: int = 0
    write_tokens: int = 0
    per_request: list[tuple[int, int, int]] = field(default_factory=list)
    """(input, read, write) for each request, in order."""

    def add(self, total: int, read: int, write: int) -> None:
        self.requests += 1
        self.input_tokens += total
        self.read_tokens += read
        self.write_tokens += write
        self.per_request.append((total, read, write))

    @property
    def read_share(self) -> float:
        """The share of input tokens served from the cache."""
        return self.read_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def effective_input_tokens(self) -> float:
        """Input priced as the provider bills it, in units of uncached input tokens."""
        fresh = self.input_tokens - self.read_tokens - self.write_tokens
        return fresh + READ_PRICE * self.read_tokens + WRITE_PRICE * self.write_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "read_tokens": self.read_tokens,
            "write_tokens": self.write_tokens,
            "read_share": round(self.read_share, 4),
            "effective_input_tokens": round(self.effective_input_tokens),
        }


def _tokens(value: Any) -> int:
    return len(_encode(_canonical(value)))


def _encode(text: str) -> list[int]:
    return default_counter().encode(text)


def _canonical(value: Any) -> str:
    return json.dumps(_unmarked(value), sort_keys=True, separators=(",", ":"))


def _unmarked(value: Any) -> Any:
    """The value without `cache_control`: markers do not change what is cached."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


@dataclass(frozen=True)
class _Block:
    tokens: int
    digest: str
    breakpoint: bool


def anthropic_blocks(body: dict[str, Any]) -> list[_Block]:
    """A Messages body as its cache sees it: blocks in prefix order, each with the digest of
    the whole prefix up to and including it, and whether it carries a breakpoint."""
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    raw: list[tuple[Any, str]] = [(tool, "tools") for tool in body.get("tools") or []]
    raw += [(block, "system") for block in system]
    choice = _canonical(body.get("tool_choice"))
    for turn in body.get("messages") or []:
        content = turn["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        raw += [({"role": turn["role"], **block}, "messages") for block in content]
    blocks, running = [], hashlib.sha256()
    for value, section in raw:
        running.update(_canonical(value).encode())
        if section == "messages":
            running.update(choice.encode())
        is_break = isinstance(value, dict) and "cache_control" in value
        blocks.append(_Block(_tokens(value), running.copy().hexdigest(), is_break))
    return blocks


def anthropic_tally(
    bodies: Sequence[dict[str, Any]],
    timing: Sequence[tuple[float, float]] | None = None,
    *,
    min_prefix: int = ANTHROPIC_MIN_PREFIX,
) -> CacheTally:
    """Anthropic's rules over request bodies sent in this order (one cache, one organisation)."""
    spans = _spans(bodies, timing)
    cached: dict[str, float] = {}  # prefix digest -> when it became readable
    tally = CacheTally()
    for body, (sent, answered) in zip(bodies, spans, strict=True):
        blocks = anthropic_blocks(body)
        ends = _running_totals(b.tokens for b in blocks)
        breaks = [i for i, b in enumerate(blocks) if b.breakpoint]
        read = 0
        for point in breaks:
            for j in range(point, max(-1, point - ANTHROPIC_LOOKBACK - 1), -1):
                if cached.get(blocks[j].digest, float("inf")) <= sent:
                    read = max(read, ends[j])
                    break
        written_to = read
        for point in breaks:
            if ends[point] >= min_prefix:
                cached[blocks[point].digest] = min(
                    cached.get(blocks[point].digest, answered), answered
                )
                written_to = max(written_to, ends[point])
        tally.add(ends[-1] if ends else 0, read, written_to - read)
    return tally


def openai_tokens(body: dict[str, Any]) -> list[int]:
    """A Chat Completions body as one token sequence: tools first, then the messages."""
    tokens: list[int] = []
    for tool in body.get("tools") or []:
        tokens += _encode(_canonical(tool))
    for message in body.get("messages") or []:
        tokens += _encode(_canonical(message))
    return tokens


def openai_tally(
    bodies: Sequence[dict[str, Any]],
    timing: Sequence[tuple[float, float]] | None = None,
    *,
    min_prefix: int = OPENAI_MIN_PREFIX,
    step: int = OPENAI_STEP,
) -> CacheTally:
    """OpenAI's automatic prefix cache over request bodies sent in this order."""
    spans = _spans(bodies, timing)
    earlier: list[tuple[float, list[int]]] = []
    tally = CacheTally()
    for body, (sent, answered) in zip(bodies, spans, strict=True):
        tokens = openai_tokens(body)
        shared = max(
            (_common_prefix(tokens, seen) for ready, seen in earlier if ready <= sent), default=0
        )
        read = 0 if shared < min_prefix else min_prefix + (shared - min_prefix) // step * step
        tally.add(len(tokens), read, 0)
        earlier.append((answered, tokens))
    return tally


def anthropic_ceiling(bodies: Sequence[dict[str, Any]]) -> CacheTally:
    """The most any cache could serve: for each request, the longest prefix of blocks it
    shares with any earlier request (no breakpoints, minimum or timing needed)."""
    seen: set[str] = set()
    tally = CacheTally()
    for body in bodies:
        blocks = anthropic_blocks(body)
        ends = _running_totals(b.tokens for b in blocks)
        shared = [ends[i] for i, b in enumerate(blocks) if b.digest in seen]
        tally.add(ends[-1] if ends else 0, max(shared, default=0), 0)
        seen.update(b.digest for b in blocks)
    return tally


def openai_ceiling(bodies: Sequence[dict[str, Any]]) -> CacheTally:
    """The most any prefix cache could serve: each request's longest common prefix, in
    tokens, with any earlier request (no minimum, steps or timing)."""
    earlier: list[list[int]] = []
    tally = CacheTally()
    for body in bodies:
        tokens = openai_tokens(body)
        tally.add(len(tokens), max((_common_prefix(tokens, e) for e in earlier), default=0), 0)
        earlier.append(tokens)
    return tally


def _spans(
    bodies: Sequence[Any], timing: Sequence[tuple[float, float]] | None
) -> list[tuple[float, float]]:
    if timing is None:
        return [(float(i), float(i) + 0.5) for i in range(len(bodies))]
    if len(timing) != len(bodies):
        raise ValueError(f"{len(bodies)} bodies but {len(timing)} timings")
    return list(timing)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _running_totals(values: Iterable[int]) -> list[int]:
    totals, running = [], 0
    for value in values:
        running += value
        totals.append(running)
    return totals
