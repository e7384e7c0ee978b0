"""Folders shipped with the package: the built-in `skills/` and `subagents/`.

The repository's top-level folders are the source of truth. `orchestrator/_builtin/<kind>` is
a symbolic link to `../../<kind>`, and pyproject.toml lists `<kind>/**/*` as package data of
`orchestrator._builtin`, so a regular (non-editable) install copies the folder's files into
the package. Shipping another folder takes one more link and one more package-data pattern.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def shipped_folder(kind: str) -> Path | None:
    """The installed or checked-out folder `kind` ("skills", "subagents"), if there is one."""
    packaged = PACKAGE_ROOT / "_builtin" / kind
    if packaged.is_dir():
        return packaged
    # A source checkout whose link did not survive (a copy without symlinks): use the folder
    # beside the package, but only inside this project, never a stray `skills` in site-packages.
    checkout = PACKAGE_ROOT.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / kind).is_dir():
        return checkout / kind
    return None


def builtin_skills_folder() -> Path | None:
    """The folder of the skills that ship with the package."""
    return shipped_folder("skills")
