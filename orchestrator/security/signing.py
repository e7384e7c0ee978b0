"""Signed traces: only what the user's own runs wrote may direct a resume.

Every line a trace file gets ends with a `mac` field: a keyed BLAKE2b hash (BLAKE2's own MAC
mode, a tenth of HMAC-SHA256's cost per line) of the previous signed line's mac and this
line's text, under a key of the user's own, kept in their configuration
folder (`~/.config/orchestrator/trace.key`, made on first use, readable by the user alone).
The chain makes every line depend on all before it, so a line that was changed, added, moved
or taken out of the middle fails, and so does a trace written without the key (by a model, by
another user, on another machine). A line torn by a crash is not an event and is skipped, as
the reader skips it; the resumed attempt signs on from the last whole line.

The file tools never read or write the key (security/inventory.py). A run with the `shell` or
`python` permission runs code as the user, so it could read the key: those permissions step
outside this boundary, as docs/skills.md says.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .inventory import user_config_folder

KEY_FILE = "trace.key"
KEY_BYTES = 32
MAC_CHARS = 32
_SIGNED = re.compile(rb'^(.*),"mac":"([0-9a-f]{%d})"\}\s*$' % MAC_CHARS, re.DOTALL)


def key_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the user's trace key lives."""
    return user_config_folder(environ) / KEY_FILE


def user_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The user's trace key, made on first use; None when it can be neither read nor made
    (a read-only home folder): traces are then written unsigned, and cannot be resumed."""
    path = key_path(environ)
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return None
    key = secrets.token_bytes(KEY_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another run made it first: use that one
        return user_key(environ)
    except OSError:
        return None
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(key.hex() + "\n")
    return key


def mac(key: bytes, previous: str, text: bytes) -> str:
    """The mac of one line: its text, chained to the previous line's mac."""
    chained = previous.encode("ascii") + b"\n" + text
    return hashlib.blake2b(chained, key=key, digest_size=MAC_CHARS // 2).hexdigest()


class LineSigner:
    """Signs the lines of one trace file in order, from `previous` (the last line's mac)."""

    def __init__(self, key: bytes, previous: str = "") -> None:
        self.key = key
        self.previous = previous

    def sign(self, line: str) -> str:
        """`line` (a JSON object's text) with its `mac` as a last field."""
        body = line[:-1]
        self.previous = mac(self.key, self.previous, body.encode("utf-8"))
        return f'{body},"mac":"{self.previous}"}}'


@dataclass(frozen=True)
class Signature:
    """What checking a trace's signatures found."""

    lines: int
    """Signed lines that verified."""
    bad_line: int | None = None
    """The first line (1-based) that is an event but fails, or carries no signature."""
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.bad_line is None and self.lines > 0


def verify_lines(
    lines: Iterable[bytes], key: bytes | None, *, is_event: Callable[[bytes], bool]
) -> Signature:
    """Check every line that `is_event` accepts against the chain of macs under `key`."""
    if key is None:
        return Signature(0, 1, "your trace key cannot be read, so no trace can be checked")
    previous, good = "", 0
    for number, raw in enumerate(lines, 1):
        if not raw.strip() or not is_event(raw):
            continue  # a torn or foreign line: the reader skips it too
        found = _SIGNED.match(raw)
        if found is None:
            return Signature(good, number, "it carries no signature")
        body, given = found.group(1), found.group(2).decode("ascii")
        if not hmac.compare_digest(mac(key, previous, body), given):
            return Signature(good, number, "its signature does not match")
        previous, good = given, good + 1
    if good == 0:
        return Signature(0, 1, "it holds no signed event")
    return Signature(good)
