"""Run one workload of one framework in a fresh process and write the outcome as JSON.

    python -m bench.worker FRAMEWORK WORKLOAD --settings JSON --catalogs DIR ... --out FILE

The outcome is `{"status": "ok", "result": ..., "notes": ...}`, or `"unavailable"` (the
framework cannot be imported) or `"failed"` (it raised), each with the reason. A fresh process
per workload keeps one framework's imports, caches and garbage out of another's figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from . import workloads
from .offline import block_network
from .peers import FRAMEWORKS
from .workloads import Settings

WORKLOADS = ("loop", "fanout", "tokens", "scan")


def settings_from_json(text: str) -> Settings:
    data = json.loads(text)
    return Settings(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def settings_to_json(settings: Settings) -> str:
    return json.dumps(dataclasses.asdict(settings))


def run(framework: Any, workload: str, settings: Settings, catalogs: list[Path]) -> Any:
    """One workload of an imported framework module."""
    if workload == "loop":
        return workloads.loop(framework, settings)
    if workload == "fanout":
        return workloads.fanout(framework, settings)
    if workload == "tokens":
        return workloads.tokens(framework, catalogs)
    if workload == "scan":
        return workloads.scan(framework, catalogs, settings)
    raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")


def outcome(key: str, workload: str, settings: Settings, catalogs: list[Path]) -> dict[str, Any]:
    try:
        module = importlib.import_module(FRAMEWORKS[key].module)
    except Exception as exc:  # ImportError, or a peer failing at import: reported, not raised
        return {"status": "unavailable", "reason": f"{type(exc).__name__}: {exc}"}
    try:
        result = run(module, workload, settings, catalogs)
    except Exception as exc:
        lines = traceback.format_exception(exc)[-3:]
        return {"status": "failed", "reason": f"{type(exc).__name__}: {exc}", "trace": lines}
    return {"status": "ok", "result": result, "notes": getattr(module, "NOTES", {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--settings", default=settings_to_json(Settings()))
    parser.add_argument("--catalogs", type=Path, nargs="*", default=[])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    block_network()
    settings = settings_from_json(args.settings)
    result = outcome(args.framework, args.workload, settings, args.catalogs)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
