"""Server-sent events: lines of a `text/event-stream` body to events.

Both wire formats stream this way: OpenAI sends bare `data:` lines, Anthropic names each event
with an `event:` line. The decoder is fed one line at a time so a recorded body and a live
response go through the same code.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSentEvent:
    """One event: its name (`message` when the stream names none) and its data lines joined."""

    event: str
    data: str


class SSEDecoder:
    """Collects `event:` and `data:` fields until a blank line ends the event.

    Comment lines (`: keep-alive`) and other fields (`id:`, `retry:`) are ignored.
    """

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerSentEvent | None:
        """Take one line (with or without its line ending); an event when one is complete."""
        line = line.rstrip("\r\n")
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None

    def flush(self) -> ServerSentEvent | None:
        """End the event in progress.

        Called at a blank line, and at the end of the body: some recorded streams lack the
        final blank line, and whether a stream is complete is decided by its own last event.
        """
        event = ServerSentEvent(self._event or "message", "\n".join(self._data))
        has_data = bool(self._data)
        self._event, self._data = "", []
        return event if has_data else None


def iter_events(text: str) -> Iterator[ServerSentEvent]:
    """The events of a whole recorded body."""
    decoder = SSEDecoder()
    for line in text.splitlines():
        if (event := decoder.feed(line)) is not None:
            yield event
    if (event := decoder.flush()) is not None:
        yield event


async def aiter_events(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """The events of a live body, given its lines (httpx's `Response.aiter_lines()`)."""
    decoder = SSEDecoder()
    async for line in lines:
        if (event := decoder.feed(line)) is not None:
            yield event
    if (event := decoder.flush()) is not None:
        yield event
