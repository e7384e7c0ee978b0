"""Provider-neutral conversation types: Message, ToolCall, Usage, and the append-only Transcript.

Every adapter translates to and from these; nothing above the adapters sees a wire format.
Every text a message carries comes from outside (a model, a tool, a file, a server) and is made
valid Unicode here, once: a lone surrogate (a broken `\\ud800` escape in a reply) becomes
U+FFFD, so no trace line, output or terminal write can fail on it later. `inert` makes text
safe to show on a terminal: the command line writes everything through it (cli/output.py).
`plural` words a count in any text the orchestrator writes (to a model, on the command line,
in a summary or report), and `suggest` a "did you mean" for a misspelt name.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, Literal, overload

from pydantic import AfterValidator, BaseModel, ConfigDict

Role = Literal["system", "user", "assistant", "tool"]


def safe_text(text: str) -> str:
    """`text` as valid Unicode: lone surrogates become U+FFFD, proper pairs their character."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


SafeText = Annotated[str, AfterValidator(safe_text)]

_ACTIVE = re.compile(
    "(?:\r(?!\n)|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069])"
)


def inert(text: str) -> str:
    """`text` safe to show on a terminal: every character a terminal would act on instead of
    showing (ESC, which begins CSI and OSC sequences, BEL, the C1 controls, a carriage return
    that is not a line end, the controls that reorder text) is written as its escape
    (`\\x1b`), so it shows that it was there and does nothing. New lines and tabs stay."""
    if text.isascii() and text.isprintable():
        return text
    return _ACTIVE.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural unless `count` is 1 (`many` when the plural
    is not the noun with an s: `plural(2, "match", "matches")`). Counts get thousands
    separators. Every message with a count uses it (the CLI, `trace show`, the report), so
    none says "1 folders" or "problem(s)"."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"


def suggest(name: str, choices: Iterable[str]) -> str:
    """A " (did you mean 'x'?)" hint for a misspelt name, or "" when nothing is close."""
    matches = difflib.get_close_matches(name, [str(c) for c in choices], n=3, cutoff=0.6)
    if not matches:
        return ""
    return " (did you mean " + " or ".join(repr(m) for m in matches) + "?)"


class ToolCall(BaseModel):
    """A tool call as the model produced it; `arguments` is the raw JSON text, never parsed here."""

    model_config = ConfigDict(frozen=True)

    id: SafeText
    name: SafeText
    arguments: SafeText = "{}"


class Usage(BaseModel):
    """Token usage of one model call, or a sum of several.

    `input_tokens` is all of the input, cached or not; `cache_read_tokens` and
    `cache_write_tokens` say how much of it the provider served from its prompt cache and
    wrote to it (0 when it reports nothing of the kind).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage._counts(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.total_tokens + other.total_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @classmethod
    def of(
        cls, input_tokens: int, output_tokens: int, *, cache_read: int = 0, cache_write: int = 0
    ) -> Usage:
        return cls._counts(
            input_tokens, output_tokens, input_tokens + output_tokens, cache_read, cache_write
        )

    @classmethod
    def _counts(
        cls, input_tokens: int, output_tokens: int, total: int, cache_read: int, cache_write: int
    ) -> Usage:
        # The cache counts are given only when there are some: pydantic keeps with each
        # object the set of fields it was given, and a set of five names takes 728 bytes where
        # one of up to four takes 216 (a run keeps a usage per agent and per task).
        if not (cache_read or cache_write):
            return cls(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total)
        return cls(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )

    @property
    def uncached_input_tokens(self) -> int:
        """Input neither read from nor written to a prompt cache."""
        return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)

    def record(self) -> dict[str, int]:
        """The counts for a trace event: the cache counts only when there are some."""
        data = self.model_dump()
        for key in ("cache_read_tokens", "cache_write_tokens"):
            if not data[key]:
                del data[key]
        return data


class Message(BaseModel):
    """One conversation message.

    Assistants may carry `tool_calls`; a `tool` message answers one call through `tool_call_id`
    and `name`, with `is_error` set (and `error_type` naming the kind) when the call failed.
    `reasoning` holds a model's separate reasoning text, never mixed into `content`.
    A `pinned` tool result is never cut by a compaction (agent/compaction.py); a `compacted`
    one is a stub a compaction put in place of a result: only a compaction sets it, so no
    text a tool returns can pass for a stub.
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    content: SafeText | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: SafeText | None = None
    name: SafeText | None = None
    is_error: bool = False
    error_type: str | None = None
    reasoning: SafeText | None = None
    pinned: bool = False
    compacted: bool = False

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str | None = None, tool_calls: Sequence[ToolCall] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool_result(
        cls,
        call: ToolCall,
        content: str,
        *,
        error_type: str | None = None,
        pinned: bool = False,
    ) -> Message:
        if error_type is None and not pinned:
            # The defaults left unset: four fields given keep the model's set of given fields
            # at its smallest (216 bytes, against 728 for seven; see `Usage._counts`).
            return cls(role="tool", content=content, tool_call_id=call.id, name=call.name)
        return cls(
            role="tool",
            content=content,
            tool_call_id=call.id,
            name=call.name,
            is_error=error_type is not None,
            error_type=error_type,
            pinned=pinned,
        )

    def as_stub(self, stub: str) -> Message:
        """This tool result replaced by a compaction's `stub` (marked `compacted`)."""
        return self.model_copy(update={"content": stub, "compacted": True})

    def to_dict(self) -> dict[str, Any]:
        """A compact JSON-ready dict: defaults are left out."""
        return self.model_dump(exclude_defaults=True)


class Transcript(Sequence[Message]):
    """An append-only list of messages.

    Because nothing is ever removed or replaced, a prefix of it is a stable snapshot:
    `view()` hands a model the conversation as it is now in O(1), and per-prefix token
    totals can be cached and extended instead of recounted.
    """

    __slots__ = ("_items", "_token_prefix")

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._items: list[Message] = list(messages)
        self._token_prefix: dict[str, list[int]] = {}

    def append(self, message: Message) -> None:
        self._items.append(message)

    def extend(self, messages: Sequence[Message]) -> None:
        self._items.extend(messages)

    def view(self) -> TranscriptView:
        return TranscriptView(self, len(self._items))

    def prefix_sums(self, key: str) -> list[int]:
        """Cumulative token counts per prefix, cached under `key` (an encoding name)."""
        return self._token_prefix.setdefault(key, [0])

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"Transcript({len(self._items)} messages)"


class TranscriptView(Sequence[Message]):
    """The first `length` messages of a Transcript: what one model request saw."""

    __slots__ = ("transcript", "length")

    def __init__(self, transcript: Transcript, length: int) -> None:
        self.transcript = transcript
        self.length = length

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):  # the messages asked for only, not the whole view
            return self.transcript._items[slice(*index.indices(self.length))]
        return self._at(index)

    def _at(self, index: int) -> Message:
        if index < 0:
            index += self.length
        if not 0 <= index < self.length:
            raise IndexError(index)
        return self.transcript[index]

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[Message]:
        items = self.transcript
        return (items[i] for i in range(self.length))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"TranscriptView({self.length} messages)"


class ToolSpec(BaseModel):
    """What a model is told about one tool: its name, description and JSON schema."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


_DIGESTS: dict[tuple[int, ...], tuple[tuple[ToolSpec, ...], int, str]] = {}


def tools_fingerprint(tools: Sequence[ToolSpec]) -> tuple[int, str]:
    """A request's tool schemas as JSON: its length in characters, and a short digest (two
    requests with the same tools array have the same one: a replay tells a changed schema by
    it, a warm prefix is keyed by it). The same schema objects in the same order (every
    request of an agent, and the sibling sub-agents of a fan-out, which share their tools'
    schemas) are serialised once: the entry keeps the schemas, so their ids cannot be reused
    by others while it lives."""
    key = tuple(map(id, tools))
    found = _DIGESTS.get(key)
    if found is not None:  # the very schemas of the entry: it holds them, ids and all
        return found[1], found[2]
    text = json.dumps(
        [spec.model_dump(mode="json") for spec in tools], sort_keys=True, ensure_ascii=False
    )
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    if len(_DIGESTS) >= 1024:
        _DIGESTS.clear()
    _DIGESTS[key] = (tuple(tools), len(text), digest)
    return len(text), digest


def tools_digest(tools: Sequence[ToolSpec]) -> str:
    """The digest of `tools_fingerprint`."""
    return tools_fingerprint(tools)[1]
