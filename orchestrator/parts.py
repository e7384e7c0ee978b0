"""Optional parts, found by name: where a name in a spec meets the code that serves it.

A job spec may name an executor (`executor: ray`), a remote agent's protocol (a sub-agent with
`a2a:`), or a tool source (a skill's MCP servers). The core never imports the part behind such
a name, nor holds its module path: each kind is a `Slot`, and the package declares its own
optional parts as entry points of the slot's group in `pyproject.toml`
(`[project.entry-points."orchestrator.executors"]`, ...). The first time a name is asked for,
its entry point is loaded; without the part's extra that is a `MissingPart` error that says
what to install. A part of one's own plugs in the same way (an entry point of one's own
package), or in code with `Slot.register`.
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class MissingPart(ConfigError):
    """A name no installed part serves (or whose extra is not installed)."""


class Slot(Generic[T]):
    """One kind of optional part, by name: what each name resolves to."""

    def __init__(self, kind: str, group: str) -> None:
        self.kind = kind
        """What the slot holds, in words an error can show (`executor`)."""
        self.group = group
        """The entry-point group its parts are declared in (`orchestrator.executors`)."""
        self._parts: dict[str, T] = {}
        self._lock = threading.Lock()

    def register(self, name: str, part: T) -> None:
        """Serve `name` with `part` from now on (over a declared entry point of that name)."""
        with self._lock:
            self._parts[name] = part

    def get(self, name: str) -> T:
        """The part that serves `name`, loaded on first use.

        Raises MissingPart when no part is declared for the name, or its extra is missing.
        """
        with self._lock:
            found = self._parts.get(name)
        if found is not None:
            return found
        # Loaded outside the lock: a part's import may register itself in this slot.
        declared = {point.name: point for point in entry_points(group=self.group)}
        point = declared.get(name)
        if point is None:
            known = ", ".join(sorted({*declared, *self._parts})) or "none"
            raise MissingPart(
                f"no {self.kind} is named {name!r} (installed: {known}); a part of its own "
                f"declares itself as an entry point of {self.group!r}"
            )
        try:
            part: T = point.load()
        except (ImportError, AttributeError) as exc:
            ours = point.dist is not None and point.dist.name == "orchestrator"
            fix = f": pip install 'orchestrator[{name}]'" if ours else ""
            raise MissingPart(f"the {self.kind} {name!r} cannot be loaded ({exc}){fix}") from None
        with self._lock:
            return self._parts.setdefault(name, part)
