"""How long `orchestrator --version` and `--help` take, and what they import.

    python bench/cli_startup.py [--runs 10] [--against /path/to/another/checkout]

Each command runs `--runs` times as `python -m orchestrator ...` in a fresh process (the
package taken from this checkout, or from `--against` for a comparison; the two alternate, so
the machine's load falls on both alike). Prints the median wall time of each, that of
`python -c pass` (the interpreter alone), and how many modules each imports (`-X importtime`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
COMMANDS = (("--version",), ("--help",))


def _run(tree: Path | None, args: tuple[str, ...]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    command = [sys.executable, "-m", "orchestrator", *args] if args else [sys.executable, "-c", ""]
    began = time.perf_counter()
    subprocess.run(command, env=env, cwd=tree or HERE, capture_output=True, check=True)
    return time.perf_counter() - began


def imports(tree: Path, args: tuple[str, ...]) -> int:
    """How many modules `python -m orchestrator ARGS` imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", *args],
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(line.startswith("import time:") for line in done.stderr.splitlines()) - 1


def measure(trees: dict[str, Path], runs: int) -> dict[str, dict[str, float]]:
    """Median seconds and module counts per tree and command, plus the bare interpreter."""
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        times.setdefault(("python", "-c pass"), []).append(_run(None, ()))
        for name, tree in trees.items():
            for args in COMMANDS:
                times.setdefault((name, args[0]), []).append(_run(tree, args))
    results: dict[str, dict[str, float]] = {}
    for (name, command), found in times.items():
        results.setdefault(name, {})[f"{command} s"] = round(statistics.median(found), 3)
        if name in trees:
            results[name][f"{command} modules"] = imports(trees[name], (command,))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per command (median)")
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    args = parser.parse_args(argv)
    trees = {"this checkout": HERE}
    if args.against is not None:
        trees["--against"] = args.against.resolve()
    for name, figures in measure(trees, max(1, args.runs)).items():
        print(f"{name}: " + ", ".join(f"{key} {value}" for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
