"""What may add to an agent: a section of its system prompt and tools.

Skills (the index and `load_skill`) and forks (`fork`, `read_task_output`) are extensions; they
live in the layers above the loop, which sees only this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .tools import Tool


class Extension(Protocol):
    """Something that adds to an agent: a section of its system prompt and tools."""

    def system_prompt(self) -> str | None: ...

    def tools(self) -> Sequence[Tool]: ...
