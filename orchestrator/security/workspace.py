"""Confining paths to a root folder: the workspace of the file tools, or a skill's folder.

A path is taken relative to the root. An absolute path, any `..` part, or a symlink whose
target lies outside the root is refused with `PathRefused` (a `PermissionDenied`, so the
model reads it as a denial, type `denied`). Symlinks that stay inside the root are followed.
`open_inside` then opens the file checked, folder by folder and without following links, so a
link swapped in after the check cannot lead out of the root.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePath
from typing import BinaryIO

from ..errors import PermissionDenied


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


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a named pipe must not wait for a writer (it is refused just after).
_MODES = {
    "rb": os.O_RDONLY | os.O_NONBLOCK,
    "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK,
}


def open_inside(root: Path, path: str, mode: str = "rb", *, label: str = "workspace") -> BinaryIO:
    """Open the file at `path` (relative to `root`) without any race with a swapped link.

    `path` is resolved and checked first (`resolve_inside`); then every folder from `root` down
    to the file is opened relative to the one before it, and the file itself too, none of them
    following a symbolic link. A link swapped in between the check and the open therefore
    makes the open fail (`PathRefused`) instead of leading out of `root`. `mode` is "rb" or
    "wb"; "wb" creates missing folders on the way.
    """
    return open_resolved(root, resolve_inside(root, path, label=label), mode, shown=repr(path))


def open_resolved(root: Path, target: Path, mode: str = "rb", *, shown: str = "") -> BinaryIO:
    """`open_inside` for a target already resolved inside `root`."""
    base = root.resolve()
    parts = target.relative_to(base).parts
    shown = shown or repr(relative_name(root, target))
    if not parts:
        raise IsADirectoryError(f"{shown} is the root folder itself")
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            inner = _enter(folder, name, create=mode == "wb")
            os.close(folder)
            folder = inner
        fd = os.open(parts[-1], _MODES[mode] | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise PathRefused(
                f"{shown} changed while it was being opened (a symbolic link appeared on its "
                "way); it was not opened."
            ) from None
        raise
    finally:
        os.close(folder)
    return _regular_file(fd, mode, shown)


def _regular_file(fd: int, mode: str, shown: str) -> BinaryIO:
    kind = os.fstat(fd).st_mode
    if stat.S_ISREG(kind):
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    os.close(fd)
    if stat.S_ISDIR(kind):
        raise IsADirectoryError(errno.EISDIR, f"{shown} is a folder")
    raise PermissionDenied(f"{shown} is not a regular file (a pipe, socket or device).")


def _enter(folder: int, name: str, *, create: bool) -> int:
    """Open the sub-folder `name` of the open folder `folder`, never through a link."""
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        if not create:
            raise
        os.mkdir(name, 0o777, dir_fd=folder)
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=folder)
