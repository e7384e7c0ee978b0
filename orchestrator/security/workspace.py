"""Confining paths to a root folder: the workspace of the file tools, or a skill's folder.

A path is taken relative to the root. An absolute path, any `..` part, or a symlink whose
target lies outside the root is refused with `PathRefused` (a `PermissionDenied`, so the
model reads it as a denial, type `denied`). Symlinks that stay inside the root are followed.
"""

from __future__ import annotations

from pathlib import Path, PurePath

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
    target = (base / pure).resolve()
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
