"""What a skill's scripts need from the sandbox, as the skill declares it, and what a run
grants of it.

A skill declares, in its frontmatter's `metadata` (strings, as the Agent Skills format has
them), the hosts and the paths its scripts reach:

    metadata:
      sandbox-network: api.example.com:443 127.0.0.1:8080
      sandbox-paths: ~/.cache/ms-playwright /opt/tool

A declaration asks; it never widens the run. The run's own permissions (`sandbox.network`,
and the workspace with `sandbox.read_only` and `sandbox.writable`) are what every command gets;
what a skill asks for beyond them is not granted, and the run says so at its start, so a
script that fails for want of a host or a folder says why beforehand. `skills check` shows
what each skill asks for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..security.permissions import Permissions, under

NETWORK_KEY = "sandbox-network"
PATHS_KEY = "sandbox-paths"
_SEPARATORS = re.compile(r"[\s,]+")
HOST_PORT = re.compile(r"^\S+:\d+$")


@dataclass(frozen=True)
class SandboxNeeds:
    """The hosts (`host:port`) and paths a skill's scripts need, as declared."""

    network: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()
    """Absolute; a path written relative to the skill's folder or with `~` made so."""

    def __bool__(self) -> bool:
        return bool(self.network or self.paths)

    def described(self) -> str:
        """What is asked for, in a line: `network a:443, b:80; paths /opt/tool`."""
        parts = [f"network {', '.join(self.network)}"] if self.network else []
        parts += [f"paths {', '.join(map(str, self.paths))}"] if self.paths else []
        return "; ".join(parts)

    def refused_by(self, permissions: Permissions) -> list[str]:
        """What a run with `permissions` does not grant of this, each with why; nothing when
        commands run unconfined (they reach everything anyway: the run says so itself)."""
        sandbox = permissions.sandbox
        if sandbox.backend == "none":
            return []
        allowed = ", ".join(sandbox.network) or "none"
        refused = []
        for entry in self.network:
            host, _, port = entry.rpartition(":")
            if not HOST_PORT.match(entry):
                refused.append(f"{entry!r}: not host:port")
            elif not sandbox.allows(host, int(port)):
                refused.append(f"{entry}: not in sandbox.network ({allowed})")
        roots = (permissions.workspace_root(), *sandbox.read_only, *sandbox.writable)
        for path in self.paths:
            if not any(under(path, root.resolve()) for root in roots):
                refused.append(
                    f"{path}: not within the workspace, sandbox.read_only or sandbox.writable"
                )
        return refused


def parse_needs(metadata: Mapping[str, str], folder: Path) -> SandboxNeeds:
    """The needs a skill's `metadata` declares (values as written: a string of entries
    separated by spaces or commas, or a YAML list kept as JSON text)."""
    return SandboxNeeds(
        network=tuple(_entries(metadata.get(NETWORK_KEY))),
        paths=tuple(
            (folder / Path(entry).expanduser()).resolve()
            for entry in _entries(metadata.get(PATHS_KEY))
        ),
    )


def _entries(value: str | None) -> list[str]:
    if not value:
        return []
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = re.sub(r"[\[\]\"']", " ", text)
    return [entry for entry in _SEPARATORS.split(text) if entry]
