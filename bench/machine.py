"""The machine a suite ran on, and the versions of every framework in it."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    return {
        "cpu": _cpuinfo("model name") or platform.processor() or "unknown",
        "nproc": _cpus(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def versions(distributions: Iterable[str]) -> dict[str, str]:
    found = {}
    for name in distributions:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _cpus() -> int | None:
    """CPUs this process may run on (what `nproc` prints)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _cpuinfo(field: str) -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == field:
            return value.strip()
    return None


def _memory_gb() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024**2, 1)
    return None
