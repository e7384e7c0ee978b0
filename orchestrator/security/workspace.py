"""Confining paths to a root folder (the workspace of the file tools, or a skill's folder), and
writing files inside it so that parallel writers lose nothing.

A path is taken relative to the root. An absolute path, any `..` part, or a symlink whose
target lies outside the root is refused with `PathRefused` (a `PermissionDenied`, so the
model reads it as a denial, type `denied`). Symlinks that stay inside the root are followed.
`open_inside` then opens the file checked, folder by folder and without following links, so a
link swapped in after the check cannot lead out of the root.

Writing (`write_resolved`, and `locked_file` for a read-modify-write such as an edit):

- **One writer per file at a time, across the run.** A write holds the file's lock: a lock per
  resolved path shared by every thread of the process (every agent and fork of a run; a
  tool's calls run in threads of their own), and an advisory lock (`flock`) on the file's
  folder, shared with other processes on the same machine (Ray workers). An edit reads,
  checks and writes under that lock, so two edits of one file both apply, or the second finds
  its text gone. The folder lock serialises writers of one folder across processes; on a
  file system that cannot lock a folder (NFS) only the per-process lock holds.
- **No torn files.** The bytes go to a temporary file in the same folder (`.NAME.XXXXXXXX` +
  `TEMP_SUFFIX`, left out of listings: `is_temporary`), are flushed to disk, and the temporary
  file is renamed over the target: a reader sees the old content or the new, never a part,
  and so does whoever looks after a crash. The file's permission bits are kept; a temporary
  file never outlives a failed write. Creating and renaming use the folder opened link by
  link, so a link swapped in for a folder cannot move the write out of the root.
- **Folders appear once.** Missing folders are created on the way; two writers that need the
  same new folder both use it.

Only writes through these functions take the locks: the shell and python tools and MCP
servers write around them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import BinaryIO

from ..errors import PermissionDenied
from .inventory import reads_no_configuration

TEMP_SUFFIX = ".orchestrator-tmp"
"""How the temporary file of a write in progress ends (it starts with a dot)."""


class PathRefused(PermissionDenied):
    """A path that would leave its root folder."""


def resolve_inside(root: Path, path: str, *, label: str = "workspace") -> Path:
    """`path` (relative to `root`) as an absolute path that is certain to lie inside `root`.

    The target need not exist. `label` names the root in refusals ("workspace", "skill folder").
    """
    text = path.strip() or "."
    pure = PurePath(text)
    if pure.is_absolute() or text.startswith("~"):
        raise PathRefused(
            f"{path!r} is an absolute path; give a path relative to the {label} root."
        )
    if ".." in pure.parts:
        raise PathRefused(f"{path!r} contains '..'; paths must stay inside the {label}.")
    base = root.resolve()
    try:
        target = (base / pure).resolve()
    except OSError as exc:  # a loop of links, or a path changing while it is resolved
        raise PathRefused(f"{path!r} cannot be resolved ({exc.strerror}).") from None
    if target != base and not target.is_relative_to(base):
        raise PathRefused(f"{path!r} leads outside the {label} through a symbolic link.")
    return target


def relative_name(root: Path, target: Path) -> str:
    """How a path inside `root` is shown to the model: relative, with forward slashes."""
    relative = target.relative_to(root.resolve())
    return relative.as_posix() if relative.parts else "."


def is_inside(root: Path, target: Path) -> bool:
    """Whether `target`, symlinks followed, lies inside `root` (for filtering listings)."""
    try:
        return target.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def is_temporary(name: str) -> bool:
    """Whether the file name `name` is that of a write in progress (listings leave it out)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a named pipe must not wait for a writer (it is refused just after).
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def open_inside(root: Path, path: str, *, label: str = "workspace") -> BinaryIO:
    """Open the file at `path` (relative to `root`) for reading, with no race with a swapped link.

    `path` is resolved and checked first (`resolve_inside`); then every folder from `root` down
    to the file is opened relative to the one before it, and the file itself too, none of them
    following a symbolic link. A link swapped in between the check and the open therefore
    makes the open fail (`PathRefused`) instead of leading out of `root`. Writes go through
    `write_resolved` (or `locked_file`).
    """
    return open_resolved(root, resolve_inside(root, path, label=label), shown=repr(path))


@reads_no_configuration(
    "the file tools' own reads and writes, inside the workspace, after `refusal` has been asked"
)
def open_resolved(root: Path, target: Path, *, shown: str = "") -> BinaryIO:
    """`open_inside` for a target already resolved inside `root`."""
    shown = shown or repr(relative_name(root, target))
    folder, name = _open_folder(root, target, create=False, shown=shown)
    try:
        with _no_swapped_link(shown):
            fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    finally:
        os.close(folder)
    return _regular_file(fd, shown)


def write_resolved(root: Path, target: Path, data: bytes, *, shown: str = "") -> None:
    """Write `data` as the whole content of `target` (resolved inside `root`), atomically and
    under the file's lock; missing folders are created.

    Check the permissions first (`Permissions.require_writable`). Blocking: call it from a
    sync tool, which runs in a thread of its own.
    """
    with locked_file(root, target, create=True, shown=shown) as file:
        file.replace(data)


@contextmanager
def locked_file(
    root: Path, target: Path, *, create: bool = False, shown: str = ""
) -> Iterator[LockedFile]:
    """Hold the write lock of `target` (resolved inside `root`) while the block runs.

    The block reads and replaces the file through the `LockedFile` it gets, so what it read
    is what it changes. `create`: make missing folders (else FileNotFoundError). Not
    re-entrant: a thread holding a file's lock must not ask for it again. Blocking, like
    `write_resolved`.
    """
    shown = shown or repr(relative_name(root, target))
    with _PROCESS_LOCKS.holding(target):
        folder, name = _open_folder(root, target, create=create, shown=shown)
        try:
            _lock_folder(folder)
            yield LockedFile(folder, name, shown)
        finally:
            with suppress(OSError):
                fcntl.flock(folder, fcntl.LOCK_UN)  # a forked child may share the descriptor
            os.close(folder)


class LockedFile:
    """A file of the workspace under its write lock (`locked_file`): read it, replace it."""

    def __init__(self, folder: int, name: str, shown: str) -> None:
        self._folder = folder
        self.name = name
        self.shown = shown

    @reads_no_configuration(
        "reads a workspace file the file tools edit, after `refusal` has been asked"
    )
    def open(self) -> BinaryIO:
        """The file as it is now, opened for reading (FileNotFoundError if there is none)."""
        with _no_swapped_link(self.shown):
            fd = os.open(self.name, _READ_FLAGS, dir_fd=self._folder)
        return _regular_file(fd, self.shown)

    @reads_no_configuration(
        "writes a workspace file the file tools edit, after `refusal` has been asked"
    )
    def replace(self, data: bytes) -> None:
        """Make `data` the file's content at once: written to a temporary file beside it,
        flushed to disk, renamed over it. The file's permission bits are kept."""
        mode = self._mode()
        temp = f".{_shortened(self.name)}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=self._folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                if mode is not None:
                    os.fchmod(handle.fileno(), mode)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.name, src_dir_fd=self._folder, dst_dir_fd=self._folder)
        except BaseException:
            with suppress(OSError):
                os.unlink(temp, dir_fd=self._folder)
            raise

    def _mode(self) -> int | None:
        """The permission bits of the file there now (None: no file); refuses what is not one."""
        try:
            info = os.stat(self.name, dir_fd=self._folder, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(info.st_mode):
            raise _refused(self.shown)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{self.shown} is a folder")
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(self.shown)
        return stat.S_IMODE(info.st_mode)


@dataclass
class _Entry:
    lock: threading.Lock
    users: int = 0


class _PathLocks:
    """A lock per resolved path for the threads of this process, kept while anyone uses it.

    Process-wide by nature, as the files are: every run, agent and fork in the process must
    meet the same lock for the same file.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[Path, _Entry] = {}

    @contextmanager
    def holding(self, path: Path) -> Iterator[None]:
        with self._guard:
            entry = self._entries.setdefault(path, _Entry(threading.Lock()))
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if not entry.users:
                    del self._entries[path]


_PROCESS_LOCKS = _PathLocks()
_NO_FOLDER_LOCKS = frozenset({errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL})


def _lock_folder(folder: int) -> None:
    """Take the advisory lock of an open folder, waiting for other processes that hold it."""
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
    except OSError as exc:
        # NFS emulates flock with byte-range locks, which need a file open for writing: a
        # folder cannot be locked there, and only the per-process lock holds.
        if exc.errno not in _NO_FOLDER_LOCKS:
            raise


def _shortened(name: str) -> str:
    """`name` cut so that a temporary name built on it stays within the 255-byte limit."""
    return name.encode()[:200].decode(errors="ignore")


@reads_no_configuration("opens a workspace file's folder, to lock it")
def _open_folder(root: Path, target: Path, *, create: bool, shown: str) -> tuple[int, str]:
    """The folder of `target`, opened link by link from `root`, and the target's name in it."""
    try:  # a root that already is resolved (the workspace's always is) need not be again
        base, parts = root, target.relative_to(root).parts
    except ValueError:
        base = root.resolve()
        parts = target.relative_to(base).parts
    if not parts:
        raise IsADirectoryError(f"{shown} is the root folder itself")
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with _no_swapped_link(shown):
            for name in parts[:-1]:
                inner = _enter(folder, name, create=create)
                os.close(folder)
                folder = inner
    except BaseException:
        os.close(folder)
        raise
    return folder, parts[-1]


@contextmanager
def _no_swapped_link(shown: str) -> Iterator[None]:
    """Turn the errors of meeting a link (or a file) where a folder was checked into a refusal."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _refused(shown) from None
        raise


def _refused(shown: str) -> PathRefused:
    return PathRefused(
        f"{shown} changed while it was being opened (a symbolic link appeared on its way); "
        "it was not opened."
    )


@reads_no_configuration("wraps a descriptor open_resolved opened")
def _regular_file(fd: int, shown: str) -> BinaryIO:
    kind = os.fstat(fd).st_mode
    if stat.S_ISREG(kind):
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    os.close(fd)
    if stat.S_ISDIR(kind):
        raise IsADirectoryError(errno.EISDIR, f"{shown} is a folder")
    raise _not_regular(shown)


def _not_regular(shown: str) -> PermissionDenied:
    return PermissionDenied(f"{shown} is not a regular file (a pipe, socket or device).")


@reads_no_configuration("opens the folders on the way to a workspace file")
def _enter(folder: int, name: str, *, create: bool) -> int:
    """Open the sub-folder `name` of the open folder `folder`, never through a link; with
    `create`, make it if it is missing (or use the one another writer just made)."""
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        if not create:
            raise
    with suppress(FileExistsError):  # another writer made it since: open theirs
        os.mkdir(name, 0o777, dir_fd=folder)
    return os.open(name, _DIRECTORY_FLAGS, dir_fd=folder)
