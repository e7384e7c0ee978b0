"""Commands the documentation pages show with their output, run again and compared as
README's are (tests/test_readme_blocks.py): each block below runs in a folder laid out as the
page says, and what each command prints is what the page shows, times aside.
`python tests/test_docs_blocks.py` writes these blocks again from fresh runs."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from console_blocks import Block, compare, console_blocks, rewritten, run, scratch

ROOT = Path(__file__).resolve().parents[1]
CSV_REPORT = Path(__file__).resolve().parent / "data" / "csv-report"
PROJECT = "/home/me/reports"
"""Where docs/skills.md's project lies: the folder the page shows in a skill's path."""


def _with_csv_report(folder: Path) -> None:
    shutil.copytree(CSV_REPORT, folder / "skills" / "csv-report")


def _with_the_data_skill(folder: Path) -> None:
    scratch(folder)
    data = folder / "orchestrator" / "_builtin" / "skills" / "data"
    shutil.copytree(ROOT / "skills" / "data", data)


@dataclass(frozen=True)
class Shown:
    """A console block of a page, and the folder its commands run in."""

    page: str
    command: str
    """The block's first command."""
    prepare: Callable[[Path], object]
    slack: int = 0
    """Tokens a count may be off by: the output holds the folder's path, which the model
    reads too."""
    needs: tuple[str, ...] = field(default=())
    """Programs or modules without which the block cannot print what it shows."""


SHOWN = [
    Shown("eval.md", "orchestrator eval examples/evals/skill-ab.eval.yaml -q", scratch),
    Shown("skills.md", "orchestrator skills check skills", _with_csv_report),
    Shown(
        "skills.md",
        "orchestrator skills show csv-report --skills skills --as-model",
        _with_csv_report,
        slack=30,
        needs=("bwrap", "mcp"),
    ),
    Shown("skills.md", "mkdir -p no-other-skills", _with_the_data_skill),
]


def block_of(shown: Shown) -> Block:
    text = (ROOT / "docs" / shown.page).read_text(encoding="utf-8")
    (block,) = [b for b in console_blocks(text) if b.commands[0].line == shown.command]
    return block


@pytest.mark.slow  # runs the pages' commands: seconds
@pytest.mark.parametrize("shown", SHOWN, ids=[f"{s.page}: {s.command}" for s in SHOWN])
def test_the_page_shows_what_its_commands_print(shown: Shown, tmp_path: Path) -> None:
    for need in shown.needs:
        if shutil.which(need) is None and importlib.util.find_spec(need) is None:
            pytest.skip(f"needs {need}")
    shown.prepare(tmp_path)
    for command in block_of(shown).commands:
        printed = run(command.line, tmp_path).replace(str(tmp_path), PROJECT)
        difference = compare(command.shown, printed, slack=shown.slack)
        assert difference is None, f"$ {command.line}\n{difference}"


def write(shown: Shown) -> None:
    """Run a page's block as the test does, and write what each command printed into the
    page in place of what the block showed."""
    page = ROOT / "docs" / shown.page
    block = block_of(shown)
    with tempfile.TemporaryDirectory() as folder:
        shown.prepare(Path(folder))
        printed = [
            run(command.line, Path(folder)).replace(folder, PROJECT) for command in block.commands
        ]
    text = page.read_text(encoding="utf-8")
    page.write_text(text[: block.start] + rewritten(block, printed) + text[block.end :])


if __name__ == "__main__":  # python tests/test_docs_blocks.py: the pages' blocks, written again
    for each in SHOWN:
        write(each)
