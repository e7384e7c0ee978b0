"""What the command line prints goes through the secret mask, as the trace does, and is made
inert for the terminal.

A model or a server may echo a key back (in an answer, an error message); `masked_output`
wraps standard output and standard error for the length of a command, so no line the CLI
prints (results, `--json`, errors, warnings, progress) carries the value of a secret
environment variable, or the credentials of a URL (`https://user:pass@host`). Each write is
masked whole: a secret is caught unless one write splits it.

Text from a file, a server or a model (a skill's description, a tool's error, an MCP
server's stderr, a tool name a model chose, a trace) may hold terminal sequences: an OSC that
sets the window title or a link, a CSI that moves the cursor or clears the screen. Every write
goes through `inert` (messages.py), so none of them acts. The live view draws with sequences
of its own: it writes to `drawing_stream()`, masked but not made inert, and makes its cells
inert itself (progress.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..messages import inert
from ..models import ModelResponse
from ..security import SecretMask
from ..security.inventory import reads_no_configuration


class MaskedStream:
    """A text stream that masks secrets in what is written to it; all else is the stream's."""

    def __init__(
        self, stream: TextIO | MaskedStream, mask: SecretMask, *, drawing: bool = False
    ) -> None:
        self._stream = stream
        self._mask = mask
        self._drawing = drawing
        """Written to by a display that draws with terminal sequences of its own."""
        self._reader_gone = False

    def write(self, text: str) -> int:
        if not self._reader_gone:
            shown = self._mask(text)
            try:
                self._stream.write(shown if self._drawing else inert(shown))
            except BrokenPipeError:
                self._drop_output()
        return len(text)

    def flush(self) -> None:
        if not self._reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop_output()

    def drawing(self) -> MaskedStream:
        """This stream for a display that draws with terminal sequences of its own: masked by
        this stream's mask (and those of the streams it wraps), not made inert."""
        inner = self._stream
        under = inner.drawing() if isinstance(inner, MaskedStream) else inner
        return MaskedStream(under, self._mask, drawing=True)

    @reads_no_configuration("opens the null device once the reader of the CLI's output has gone")
    def _drop_output(self) -> None:
        """The reader closed the pipe (`orchestrator run ... | head -1`): what is printed from
        now on goes nowhere, and the run goes on as if it had been read. The stream's file
        becomes /dev/null, so the interpreter's last flush cannot fail either."""
        self._reader_gone = True
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def masked_output(mask: SecretMask | None = None) -> Iterator[SecretMask]:
    """Within the block, `sys.stdout` and `sys.stderr` mask every secret they are given."""
    mask = mask or SecretMask()  # credentials in URLs are masked even with no secret known
    out, err = sys.stdout, sys.stderr
    sys.stdout = MaskedStream(out, mask)
    sys.stderr = MaskedStream(err, mask)
    try:
        yield mask
    finally:
        sys.stdout, sys.stderr = out, err


def inert_proxies() -> None:
    """While the live view runs, rich puts proxies of its own in `sys.stdout` and
    `sys.stderr` (what is printed then goes above the display, and rich reads the terminal
    sequences in it as styles and links): wrap them, so that what reaches them is inert."""
    if not isinstance(sys.stdout, MaskedStream):
        sys.stdout = MaskedStream(sys.stdout, SecretMask())
    if not isinstance(sys.stderr, MaskedStream):
        sys.stderr = MaskedStream(sys.stderr, SecretMask())


def drawing_stream() -> TextIO:
    """Standard error for the live view, which draws with terminal sequences of its own:
    masked as every other write, not made inert (its cells are, where they are made)."""
    err = sys.stderr
    if isinstance(err, MaskedStream):
        # A text stream in all but its class, as the one it wraps.
        return err.drawing()  # type: ignore[return-value]
    return err


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


@reads_no_configuration("opens the null device to silence output")
def silence_stdout() -> None:
    """Send what is still to be written to the null device: stop quietly, as Unix tools do
    when their reader went away."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
