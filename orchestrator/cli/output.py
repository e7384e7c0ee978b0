"""What the command line prints goes through the secret mask, as the trace does.

A model or a server may echo a key back (in an answer, an error message); `masked_output`
wraps standard output and standard error for the length of a command, so no line the CLI
prints (results, `--json`, errors, progress) carries the value of a secret environment
variable, or the credentials of a URL (`https://user:pass@host`). Each write is masked
whole: a secret is caught unless one write splits it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..security import SecretMask


class MaskedStream:
    """A text stream that masks secrets in what is written to it; all else is the stream's."""

    def __init__(self, stream: TextIO, mask: SecretMask) -> None:
        self._stream = stream
        self._mask = mask

    def write(self, text: str) -> int:
        self._stream.write(self._mask(text))
        return len(text)

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
