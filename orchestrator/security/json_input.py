"""Reading JSON the package did not write: one parser for every JSON text read from a file a
user gave, a line of a JSON Lines file, or a reply.

`json.loads` raises `RecursionError`, not a `ValueError`, on arrays or objects nested about a
thousand deep: unguarded, one such value ends a command in a traceback. `load_json` turns it,
as it does a syntax error, into a `JsonInputError` naming the source and line.

JSON Lines are split at `\\n` only (`json_lines`): `str.splitlines()` also splits at U+2028,
U+2029, U+0085, `\\x1c`-`\\x1e`, `\\v` and `\\f`, which `json.dumps(..., ensure_ascii=False)`
leaves unescaped inside strings, so it would cut a sound line in two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


class JsonInputError(ValueError):
    """JSON that cannot be read; `line` (from 1) is the line of a JSON Lines file."""

    def __init__(self, source: str, problem: str, *, line: int | None = None) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        where = f", line {line}" if line is not None else ""
        super().__init__(f"{source}{where}: {problem}")

    @property
    def detail(self) -> str:
        """The problem with its line, without the source's name."""
        return f"line {self.line}: {self.problem}" if self.line is not None else self.problem


def load_json(text: str | bytes, source: str, *, line: int | None = None) -> Any:
    """The Python value of a JSON text; a `JsonInputError` naming `source` (and `line`) when
    it is not JSON, not UTF-8, or nested too deeply for Python."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}"
        if line is None:
            where = f"line {exc.lineno}, {where}"
        raise JsonInputError(source, f"not JSON ({exc.msg}, {where})", line=line) from None
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start})"
        raise JsonInputError(source, problem, line=line) from None
    except RecursionError:
        raise JsonInputError(source, "the JSON is nested too deeply", line=line) from None


def json_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a JSON Lines text that hold something, numbered from 1, split at `\\n`
    only."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line
