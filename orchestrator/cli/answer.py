"""Showing an agent's answer on stdout while the model writes it (`ask`, `run --stream`).

The model's text arrives in fragments (or whole, from a server that does not stream) and is
written as it comes. A turn that goes on to call tools is not the answer: it usually has no
text, and what text it has (a line some models write before their calls) is ended with a
newline. After the run, `finish` writes the answer if it was not shown as it was written (a
scripted or failed run), so stdout always ends with the answer.
"""

from __future__ import annotations

import sys
from typing import TextIO

from ..models import ModelResponse


class AnswerStream:
    """A `TextSink` that writes to a stream (stdout by default)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.turn: list[str] = []
        self.answer: str | None = None
        self.at_line_start = True

    def text(self, fragment: str) -> None:
        self.out.write(fragment)
        self.out.flush()
        self.turn.append(fragment)
        self.at_line_start = fragment.endswith("\n")

    def turn_end(self, response: ModelResponse) -> None:
        text, self.turn = "".join(self.turn), []
        if response.message.tool_calls:
            self._end_line()
        else:
            self.answer = text

    def finish(self, output: str) -> None:
        """After the run: make sure the answer is there, on lines of its own."""
        if output and output != self.answer:
            self._end_line()
            self.out.write(output)
            self.at_line_start = output.endswith("\n")
        if output or self.answer:
            self._end_line()
        self.out.flush()

    def _end_line(self) -> None:
        if not self.at_line_start:
            self.out.write("\n")
            self.at_line_start = True
