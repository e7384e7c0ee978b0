"""Reading text files of any size in bounded memory, for the tools that show them to a model.

`read_lines` returns a range of lines, at most `max_chars` characters of them; `read_chars`
a stretch of characters from an offset. Both stream the file in chunks, so memory stays near
the cap whatever the file's size, and a single line longer than the cap is cut, not read whole.
Lines end at `\\n` (a `\\r\\n` stays part of its line, byte for byte); text is UTF-8, with
undecodable bytes shown as U+FFFD.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from typing import BinaryIO

CHUNK = 1 << 20
MAX_BYTES_PER_CHAR = 4


@dataclass(frozen=True)
class Lines:
    """Lines `first`..`last_shown` of a file of `total` lines; `cut_line` was cut at the cap."""

    text: str
    first: int
    last_shown: int
    total: int
    cut_line: int | None = None


def read_lines(handle: BinaryIO, first: int, last: int | None, max_chars: int) -> Lines:
    """Lines `first` to `last` (None: to the end), as many as fit in `max_chars`."""
    total = _count_lines(handle)
    handle.seek(0)
    _skip_lines(handle, first - 1)
    chosen: list[str] = []
    size, number, cut = 0, first - 1, None
    limit = max_chars * MAX_BYTES_PER_CHAR
    while last is None or number < last:
        raw = handle.readline(limit)
        if not raw:
            break
        whole = raw.endswith(b"\n") or len(raw) < limit
        line = raw.decode("utf-8", errors="replace")
        if whole and size + len(line) <= max_chars:
            chosen.append(line)
            size += len(line)
            number += 1
            continue
        if not chosen:  # one line longer than the cap: its start is shown
            chosen.append(line[:max_chars])
            number, cut = number + 1, number + 1
        break
    return Lines("".join(chosen), first, first + len(chosen) - 1, total, cut)


def read_chars(handle: BinaryIO, offset: int, max_chars: int) -> tuple[str, int]:
    """`max_chars` characters from character `offset`, and the text's length in characters."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    kept: list[str] = []
    seen = 0

    def take(text: str) -> None:
        nonlocal seen
        start, end = offset - seen, offset + max_chars - seen
        if end > 0 and start < len(text):
            kept.append(text[max(0, start) : end])
        seen += len(text)

    while chunk := handle.read(CHUNK):
        take(decoder.decode(chunk))
    take(decoder.decode(b"", final=True))
    return "".join(kept), seen


def _count_lines(handle: BinaryIO) -> int:
    newlines, last = 0, b""
    while chunk := handle.read(CHUNK):
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
    return newlines + (1 if last and last != b"\n" else 0)


def _skip_lines(handle: BinaryIO, count: int) -> None:
    """Move past the first `count` lines (or to the end of a shorter file)."""
    skipped = 0
    while skipped < count and (chunk := handle.read(CHUNK)):
        found = chunk.count(b"\n")
        if skipped + found < count:
            skipped += found
            continue
        position = -1
        for _ in range(count - skipped):
            position = chunk.index(b"\n", position + 1)
        handle.seek(position + 1 - len(chunk), os.SEEK_CUR)
        return
