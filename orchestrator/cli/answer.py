"""Showing an agent's answer on stdout while the model writes it (`ask`, `run --stream`).

The model's text arrives in fragments (or whole, from a server that does not stream) and is
written as it comes. A turn that goes on to call tools is not the answer: it usually has no
text, and what text it has (a line some models write before their calls) is ended with a
newline. After the run, `finish` writes the answer if it was not shown as it was written (a
scripted or failed run), so stdout always ends with the answer.

Secrets are masked as in the trace. A secret may arrive split over fragments, so the last few
characters (one fewer than the longest secret) wait until more text or the end of the turn
shows they are not the start of one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from ..models import ModelResponse
from ..security import SecretMask


class AnswerStream:
    """A `TextSink` that writes to a stream (stdout by default), masking `secrets`."""

    def __init__(self, out: TextIO | None = None, *, secrets: Iterable[str] = ()) -> None:
        self.out = out or sys.stdout
        self.mask = SecretMask(list(secrets))
        self.hold = max((len(s) for s in self.mask.secrets), default=1) - 1
        self.pending = ""
        self.turn: list[str] = []
        self.answer: str | None = None
        self.at_line_start = True

    def text(self, fragment: str) -> None:
        self.turn.append(fragment)
        self.pending = self.mask(self.pending + fragment)
        ready = len(self.pending) - self.hold
        if ready > 0:
            self._write(self.pending[:ready])
            self.pending = self.pending[ready:]

    def turn_end(self, response: ModelResponse) -> None:
        self._flush()
        text, self.turn = "".join(self.turn), []
        if response.message.tool_calls:
            self._end_line()
        else:
            self.answer = text

    def finish(self, output: str) -> None:
        """After the run: make sure the answer is there, on lines of its own."""
        self._flush()
        if output and output != self.answer:
            self._end_line()
            self._write(self.mask(output))
        if output or self.answer:
            self._end_line()
        self.out.flush()

    def _flush(self) -> None:
        if self.pending:
            self._write(self.pending)
            self.pending = ""

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def _end_line(self) -> None:
        if not self.at_line_start:
            self._write("\n")
