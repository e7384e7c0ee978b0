"""Tools from a skill's `tools.py`: every `@tool` function at its top level.

`tools.py` is imported from its file path under a module name of its own (the skill's name
plus a hash of its folder), so two skills' `tools.py` never meet in `sys.modules`, and no
`__pycache__` is written into the skill folder. Each tool is named `{skill}__{tool}`.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from ...agent import Tool
from ..skill import SkillError, SkillInfo, qualified_tool_name

TOOLS_FILE = "tools.py"


class _NoCacheLoader(importlib.machinery.SourceFileLoader):
    """A source loader that never writes bytecode next to the skill's files."""

    def set_data(self, path: str, data: bytes, *, _mode: int = 0o666) -> None:
        return None


def import_tools(info: SkillInfo) -> tuple[Tool, ...]:
    """The skill's tools, renamed `{skill}__{tool}`; () for a skill without tools.py."""
    path = info.folder / TOOLS_FILE
    if not path.is_file():
        return ()
    module = import_module_from(path, module_name(info))
    tools: dict[str, Tool] = {}
    for value in vars(module).values():
        if isinstance(value, Tool):
            name = qualified_tool_name(info.name, value.name)
            tools.setdefault(name, value.renamed(name))
    return tuple(tools.values())


def module_name(info: SkillInfo) -> str:
    digest = hashlib.sha1(str(info.folder.resolve()).encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() else "_" for c in info.name)
    return f"_orchestrator_skill_{safe}_{digest}"


def import_module_from(path: Path, name: str) -> ModuleType:
    """Import one Python file as module `name`; SkillError, naming the file, if that fails."""
    loader = _NoCacheLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise SkillError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise SkillError(f"{path} failed to import: {type(exc).__name__}: {exc}") from exc
    return module
