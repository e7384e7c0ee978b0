"""Big inputs in bounded memory: peak RSS and time of `files__read_file` on 200 MB files (one
long line; many short lines) and of `http__get` of a 200 MB body, each in a fresh process.

    python bench/big_inputs.py [--mb 200]

Peak RSS growth is measured from just before the call (imports done) to just after it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CALL = """
import asyncio, json, resource, time
from orchestrator import Permissions
from orchestrator.agent import ToolContext
from orchestrator.skills import SkillCatalog
tools = {{t.name: t for s in ("files", "http") for t in SkillCatalog().load(s).tools}}
ctx = ToolContext(agent="b", permissions=Permissions(workspace=".", network=["127.0.0.1"]))
tool = tools[{tool!r}]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.perf_counter()
text = asyncio.run(tool.invoke(tool.parse_arguments({arguments!r}), ctx))
seconds = time.perf_counter() - began
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"growth_mb": (after - before) / 1024, "seconds": seconds,
                  "chars": len(text)}}))
"""


def measure(tool: str, arguments: dict[str, object], cwd: Path) -> dict[str, float]:
    code = CALL.format(tool=tool, arguments=json.dumps(arguments))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_files(folder: Path, megabytes: int) -> None:
    with (folder / "one-line.txt").open("w") as out:
        for _ in range(megabytes):
            out.write("y" * 1_000_000)
    line = "a short line of text\n"
    with (folder / "many-lines.txt").open("w") as out:
        for _ in range(megabytes * 1_000_000 // len(line) // 10_000):
            out.write(line * 10_000)


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from hostile_server import hostile_server  # the tests' hostile server, reused

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of each input in MB")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as folder, hostile_server() as server:
        here = Path(folder)
        write_files(here, args.mb)
        for name in ("one-line.txt", "many-lines.txt"):
            results[f"read_file {name}"] = measure("files__read_file", {"path": name}, here)
        url = f"{server}/huge/{args.mb}"
        results["http__get body"] = measure("http__get", {"url": url, "timeout_seconds": 120}, here)
    for what, figures in results.items():
        print(
            f"{what:28} peak RSS +{figures['growth_mb']:6.1f} MB  "
            f"{figures['seconds']:6.2f} s  {int(figures['chars']):,} characters shown"
        )


if __name__ == "__main__":
    main()
