"""Commands shown with their output in the documentation, run again and compared.

A ```console block holds commands (`$ orchestrator ...`, a line ending in `\\` goes on on the
next) each followed by the output it printed, standard error and standard output as one
stream, as a terminal shows them (piped: the live tree is then a line per change). Running a
block runs each command as a user would from a clone, `orchestrator` being this checkout's
(`python -m orchestrator`), and other commands through bash; `compare` holds what one printed
to what the block shows, with what varies from run to run set aside: times, run ids, the
order of progress lines printed at the same moment, the width of table columns, and token
counts within 1% (the prompts carry the folder a clone lies in, a few tokens more or less).

    python tests/console_blocks.py [README.md]

runs README's blocks in a fresh folder holding a copy of `examples/` and writes what each
command printed into the file (the picture at the top of README is made so).
`tests/test_readme_blocks.py` runs them and compares.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```console\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_BLOCK = re.compile(r"^<!-- file: (\S+) -->\n```\w*\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b")
ELAPSED = re.compile(r"^\[\s*\d+\.\d+s\]")
SECONDS = re.compile(r"\b\d+\.\d+s\b")
LAST_COLUMN_SECONDS = re.compile(r"(?<= )\d+\.\d+$")  # an eval table's s/run
TOKENS = re.compile(r"\b\d{1,3}(?:,\d{3})+\b|\b\d+(?= tokens\b)")
TOKEN_TOLERANCE = 0.01


@dataclass(frozen=True)
class Command:
    """One command of a console block and the output the block shows for it."""

    line: str
    """The command, its continued lines joined."""
    shown: str
    written: str
    """The command as the block writes it, over several lines where it goes on."""


@dataclass(frozen=True)
class Block:
    """A console block: where its text lies in the document, and its commands."""

    start: int
    end: int
    commands: tuple[Command, ...]


def console_blocks(text: str) -> list[Block]:
    """Every ```console block of a document, in order."""
    blocks = []
    for match in BLOCK.finditer(text):
        commands: list[Command] = []
        lines = match.group(1).splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            if not line.startswith("$ "):
                raise ValueError(f"a console block starts with a command: {line!r}")
            command, written = line[2:], [line]
            while command.endswith("\\"):
                index += 1
                command = command[:-1].rstrip() + " " + lines[index].strip()
                written.append(lines[index])
            index += 1
            output = []
            while index < len(lines) and not lines[index].startswith("$ "):
                output.append(lines[index])
                index += 1
            commands.append(Command(command, "\n".join(output), "\n".join(written)))
        blocks.append(Block(match.start(1), match.end(1), tuple(commands)))
    return blocks


def file_blocks(text: str) -> list[tuple[str, str]]:
    """Each block marked `<!-- file: PATH -->`: (PATH, the block's text), which is a part of
    that file as the commands before it left it."""
    return [(match.group(1), match.group(2)) for match in FILE_BLOCK.finditer(text)]


def run(command: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """What a command prints, standard error and output as one stream (`env` over this
    process's environment)."""
    words = shlex.split(command)
    args = (
        [sys.executable, "-m", "orchestrator", *words[1:]]
        if words[0] == "orchestrator"
        else ["bash", "-c", command]
    )
    done = subprocess.run(
        args,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )
    return done.stdout.rstrip("\n")


def scratch(folder: Path) -> Path:
    """A folder as a fresh clone has it for README's commands: a copy of `examples/`."""
    shutil.copytree(ROOT / "examples", folder / "examples", ignore=shutil.ignore_patterns("out"))
    return folder


def _normalised(line: str) -> str:
    line = RUN_ID.sub("RUN-ID", line)
    line = ELAPSED.sub("[T]", line)
    line = SECONDS.sub("Ts", line)
    line = LAST_COLUMN_SECONDS.sub("T", line.rstrip())
    return " ".join(line.split())


def _lines(output: str) -> list[str]:
    """The output's lines, normalised, each run of progress lines in sorted order (lines
    printed at the same moment by concurrent agents come in either order)."""
    lines: list[str] = []
    group: list[str] = []
    for raw in output.splitlines():
        if ELAPSED.match(raw):
            group.append(_normalised(raw))
            continue
        lines.extend(sorted(group))
        group = []
        lines.append(_normalised(raw))
    return lines + sorted(group)


def _same_figures(shown: str, printed: str, slack: int) -> bool:
    shown_counts, printed_counts = TOKENS.findall(shown), TOKENS.findall(printed)
    if TOKENS.sub("N", shown) != TOKENS.sub("N", printed):
        return False
    for a, b in zip(shown_counts, printed_counts, strict=True):
        expected, got = int(a.replace(",", "")), int(b.replace(",", ""))
        if abs(expected - got) > max(TOKEN_TOLERANCE * expected, slack):
            return False
    return True


def compare(shown: str, printed: str, *, slack: int = 0) -> str | None:
    """None when the output printed is the one shown, else what differs. A token count may
    be 1% off, or `slack` tokens (where the output carries a path of the machine)."""
    expected, got = _lines(shown), _lines(printed)
    if len(expected) == len(got) and all(
        _same_figures(a, b, slack) for a, b in zip(expected, got, strict=True)
    ):
        return None
    return "shown:\n" + shown + "\n\nprinted:\n" + printed


def rewritten(block: Block, printed: list[str]) -> str:
    """A block's text with what each of its commands printed in place of what it showed."""
    return "".join(
        f"{command.written}\n" + (f"{output}\n" if output else "")
        for command, output in zip(block.commands, printed, strict=True)
    )


def write(document: Path) -> None:
    """Run a document's console blocks in a fresh folder holding a copy of `examples/`, and
    write what each command printed in place of what the block showed."""
    text = document.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        cwd = scratch(Path(folder))
        pieces, at = [], 0
        for block in console_blocks(text):
            printed = [run(command.line, cwd) for command in block.commands]
            pieces += [text[at : block.start], rewritten(block, printed)]
            at = block.end
        pieces.append(text[at:])
    document.write_text("".join(pieces), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "README.md")
