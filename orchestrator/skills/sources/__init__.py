"""Where a skill's tools come from: its `tools.py` (Python functions)."""

from .module import TOOLS_FILE, import_module_from, import_tools, module_name

__all__ = ["TOOLS_FILE", "import_module_from", "import_tools", "module_name"]
