"""Signing a trace a test put together by hand, as the user's own run would have signed it.

Tests that cut, copy or edit a real trace to stand for a crash play the user's own machine:
they sign the result with the user's key (security/signing.py). A test that plays the
attacker leaves its forgery unsigned, or signs it with another key.
"""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.security.signing import LineSigner, user_key

_MAC = re.compile(rb',"mac":"[0-9a-f]+"\}(\s*)$')


def resign(path: Path, key: bytes | None = None) -> None:
    """Sign every JSON-object line of the trace at `path` again, in order, with `key` (the
    user's own by default). Other lines (a torn one) are kept as they are."""
    key = key if key is not None else user_key()
    assert key is not None
    signer = LineSigner(key)
    lines = []
    for raw in path.read_bytes().splitlines(keepends=True):
        body = _MAC.sub(rb"}\1", raw)
        text = body.rstrip(b"\r\n")
        ending = body[len(text) :]
        if text.startswith(b"{") and text.endswith(b"}"):
            lines.append(signer.sign(text.decode("utf-8")).encode("utf-8") + ending)
        else:
            lines.append(raw)
    path.write_bytes(b"".join(lines))
