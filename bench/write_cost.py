"""What a safe write costs per call: the path lock and the atomic replace of `write_resolved`
(what `files__write_file` and `files__edit_file` use) against a plain write of the same bytes.

    python bench/write_cost.py [--calls 2000] [--sizes 1000 100000] [--folder DIR]

Each figure is the median of `--calls` calls, one after another on one file (no contention),
with [p10, p90]. The rows: a plain `open(path, "wb").write(data)`; the lock alone
(`locked_file`: the folder opened link by link, the per-process lock and the folder's
`flock`); the atomic write without its `fsync` (temporary file, rename); and the whole
`write_resolved`. `--folder` picks the file system (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.security import locked_file, write_resolved
from orchestrator.security import workspace as workspace_module


def timed(call: Callable[[], object], calls: int) -> list[float]:
    """Microseconds of each of `calls` calls, after 20 unmeasured ones."""
    for _ in range(20):
        call()
    spent = []
    for _ in range(calls):
        began = time.perf_counter()
        call()
        spent.append((time.perf_counter() - began) * 1e6)
    return spent


def measure(root: Path, size: int, calls: int) -> dict[str, list[float]]:
    data = os.urandom(size)
    target = root.resolve() / "sub" / "file.bin"
    target.parent.mkdir(exist_ok=True)
    shown = "'sub/file.bin'"  # as the file tools pass it: no path is made for a message

    def plain() -> None:
        with target.open("wb") as handle:
            handle.write(data)

    def lock_only() -> None:
        with locked_file(root, target, shown=shown):
            pass

    def atomic_no_fsync() -> None:
        real = workspace_module.os.fsync
        workspace_module.os.fsync = lambda fd: None
        try:
            write_resolved(root, target, data, shown=shown)
        finally:
            workspace_module.os.fsync = real

    def atomic() -> None:
        write_resolved(root, target, data, shown=shown)

    return {
        "plain write": timed(plain, calls),
        "lock alone": timed(lock_only, calls),
        "lock + atomic write, no fsync": timed(atomic_no_fsync, calls),
        "lock + atomic write + fsync (write_resolved)": timed(atomic, calls),
    }


def _quantile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=10)[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per figure")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--folder", type=Path, default=None, help="where to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        root = Path(folder)
        print("| bytes | write | median µs [p10, p90] | / plain write |")
        print("| --- | --- | --- | --- |")
        for size in args.sizes:
            figures = measure(root, size, args.calls)
            base = statistics.median(figures["plain write"])
            for what, spent in figures.items():
                median = statistics.median(spent)
                spread = f"[{_quantile(spent, 1):,.0f}, {_quantile(spent, 9):,.0f}]"
                print(f"| {size:,} | {what} | {median:,.0f} {spread} | {median / base:.1f}x |")


if __name__ == "__main__":
    main()
