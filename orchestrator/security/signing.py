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
import itertools
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .inventory import reads, user_config_folder

KEY_FILE = "trace.key"
KEY_BYTES = 32
MAC_CHARS = 32
_SIGNED = re.compile(rb'^(.*),"mac":"([0-9a-f]{%d})"\}\s*$' % MAC_CHARS, re.DOTALL)


def key_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the user's trace key lives."""
    return user_config_folder(environ) / KEY_FILE


class TraceKeyRefused(ConfigError):
    """The user's trace key, or the folder that holds it, is open to other users: whoever can
    read the key can sign a trace that `resume` trusts, and whoever can write it (or its
    folder) can put a key of their own in its place. The message says how to close it."""


@reads("user configuration")
def user_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The user's trace key, made on first use; None when it can be neither read nor made
    (a read-only home folder): traces are then written unsigned, and cannot be resumed.
    Raises TraceKeyRefused when the key or its folder is open to other users."""
    path = key_path(environ)
    _refuse_open_folder(path.parent)
    try:
        with path.open("rb") as file:
            _refuse_open_key(path, os.fstat(file.fileno()).st_mode)
            key = bytes.fromhex(file.read().decode("ascii").strip())
        return key if len(key) == KEY_BYTES else None
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return None
    key = secrets.token_bytes(KEY_BYTES)
    try:
        _make_private_folder(path.parent)
        # Written whole beside it, then linked into place: a run reading the key at the same
        # moment finds no file or the whole key, never an empty one.
        fd, draft = tempfile.mkstemp(dir=path.parent, prefix=".trace-key-")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(key.hex() + "\n")
            os.link(draft, path)
        finally:
            Path(draft).unlink()
    except FileExistsError:  # another run made it first: use that one
        return user_key(environ)
    except OSError:
        return None
    return key


def _refuse_open_folder(folder: Path) -> None:
    try:
        mode = folder.stat().st_mode
    except OSError:
        return  # not made yet: it will be the user's alone
    if mode & 0o022:
        raise TraceKeyRefused(
            f"other users can write your configuration folder {folder} (mode "
            f"{stat.S_IMODE(mode):04o}), so they could put a trace key of their own in it; "
            f"make it yours alone with `chmod 700 {folder}`"
        )


def _refuse_open_key(path: Path, mode: int) -> None:
    if mode & 0o077:
        raise TraceKeyRefused(
            f"other users can read or write your trace key {path} (mode "
            f"{stat.S_IMODE(mode):04o}), so they could sign a trace that resume would trust; "
            f"make it yours alone with `chmod 600 {path}`"
        )


def _make_private_folder(folder: Path) -> None:
    """`folder`, and the folders above it that are missing, for the user alone (0700, as the
    XDG base directory spec asks), whatever the umask: `mkdir -p` would leave them open."""
    missing = list(itertools.takewhile(lambda each: not each.exists(), (folder, *folder.parents)))
    for each in reversed(missing):
        each.mkdir(mode=0o700, exist_ok=True)
        each.chmod(0o700)


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
