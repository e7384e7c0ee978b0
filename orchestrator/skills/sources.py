"""Where a skill's tools come from: its `tools.py`, every `@tool` function at its top level.

Only the file the catalog saw when it scanned is imported: its bytes are read once, checked
against the digest taken at the scan, and those same bytes are compiled, so a `tools.py` that
appeared or changed afterwards (written by a model, say) never runs. It is imported under a
module name of its own (the skill's name plus a hash of its folder), so two skills' `tools.py`
never meet in `sys.modules`, and no `__pycache__` is written into the skill folder. Each tool
is named `{skill}__{tool}`.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

from ..agent import Tool
from ..security.inventory import reads
from .skill import SkillError, SkillInfo, qualified_tool_name

TOOLS_FILE = "tools.py"
_IMPORTING: dict[str, threading.Lock] = {}
_IMPORTING_GUARD = threading.Lock()


class _Source(importlib.abc.SourceLoader):
    """Loads a module from bytes already read (and checked); writes no bytecode."""

    def __init__(self, path: Path, source: bytes) -> None:
        self.path = path
        self.source = source

    def get_filename(self, fullname: str) -> str:
        return str(self.path)

    def get_data(self, path: str) -> bytes:
        return self.source


def import_tools(info: SkillInfo) -> tuple[Tool, ...]:
    """The skill's tools, renamed `{skill}__{tool}`; () for a skill without tools.py."""
    path = info.folder / TOOLS_FILE
    source = verified_source(info, path)
    if source is None:
        return ()
    module = import_module_from(path, module_name(info), source)
    tools: dict[str, Tool] = {}
    for value in vars(module).values():
        if isinstance(value, Tool):
            name = qualified_tool_name(info.name, value.name)
            tools.setdefault(name, value.renamed(name))
    return tuple(tools.values())


@reads("skill")
def verified_source(info: SkillInfo, path: Path) -> bytes | None:
    """`tools.py` as it was when the catalog scanned it, or None if it had none then."""
    try:
        source = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        source = None
    except OSError as exc:
        raise SkillError(f"{path}: cannot be read: {exc.strerror}") from None
    if info.tools_digest is None:
        if source is not None:
            raise SkillError(
                f"{path} appeared after the skill catalog was scanned; it is not imported "
                "(only code that was there before the run started can run)"
            )
        return None
    if source is None or hashlib.sha256(source).hexdigest() != info.tools_digest:
        what = "was removed" if source is None else "changed"
        raise SkillError(
            f"{path} {what} after the skill catalog was scanned; it is not imported "
            "(only code that was there before the run started can run)"
        )
    return source


def module_name(info: SkillInfo) -> str:
    digest = hashlib.sha1(str(info.folder.resolve()).encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() else "_" for c in info.name)
    return f"_orchestrator_skill_{safe}_{digest}"


@reads("skill")
def import_module_from(path: Path, name: str, source: bytes | None = None) -> ModuleType:
    """Import one Python file as module `name`, from `source` (its bytes) when given;
    SkillError, naming the file, if that fails."""
    if source is None:
        try:
            source = path.read_bytes()
        except OSError as exc:
            raise SkillError(f"{path}: cannot be read: {exc.strerror}") from None
    loader = _Source(path, source)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise SkillError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    # One import of a name at a time, process-wide: two catalogs (two runs of one process)
    # importing the same file at once would each replace the other's half-made module in
    # `sys.modules`, where its annotations (pydantic's, `from __future__ import annotations`)
    # are resolved.
    with _IMPORTING_GUARD:
        lock = _IMPORTING.setdefault(name, threading.Lock())
    with lock:
        sys.modules[name] = module
        try:
            loader.exec_module(module)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            sys.modules.pop(name, None)
            raise SkillError(f"{path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module
