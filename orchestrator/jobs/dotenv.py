"""Keys from `.env` files: beside the job spec, and in the working folder.

The values are read, never put into `os.environ`: the real environment wins over them, and
they reach only the models that need them (and the trace's secret mask, so a value that
looks like a secret is masked there like one from the environment). A spec's folder wins
over the working folder.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dotenv import dotenv_values

from ..security.inventory import DOTENV_FILES

DOTENV = DOTENV_FILES[0]


def read_dotenv(folders: Iterable[Path | None]) -> dict[str, str]:
    """The variables of the `.env` file in each folder; a later folder wins over an earlier."""
    values: dict[str, str] = {}
    seen: set[Path] = set()
    for folder in folders:
        if folder is None:
            continue
        path = (folder / DOTENV).resolve()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        found = dotenv_values(path, interpolate=False)
        values.update({name: value for name, value in found.items() if value is not None})
    return values


def job_dotenv(spec: Path, cwd: Path | None = None) -> dict[str, str]:
    """The `.env` variables for the job spec at `spec`: the working folder's, then the spec's."""
    return read_dotenv([cwd or Path.cwd(), spec.resolve().parent])
