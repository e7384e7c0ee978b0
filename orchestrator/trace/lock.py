"""An advisory lock on an open trace file, held while a run writes it.

A run that is killed drops its lock with its process, so `resume` can tell a run that died
from one that is still going. Where the platform has no `fcntl` (Windows), nothing is locked.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from ..security.inventory import reads

try:
    import fcntl
except ImportError:  # Windows
    _CAN_LOCK = False
else:
    _CAN_LOCK = True


class FileBusy(Exception):
    """Another process holds the lock."""


def lock_file(file: IO[Any]) -> None:
    """Take the file's lock without waiting; raise FileBusy if another process has it."""
    if not _CAN_LOCK:
        return
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise FileBusy(str(getattr(file, "name", "file"))) from None


@reads("trace")
def is_locked(path: str | Path) -> bool:
    """True if another process holds the lock of the file at `path` (its run is going)."""
    if not _CAN_LOCK:
        return False
    try:
        with Path(path).open("rb") as file:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False
