"""README's commands print what README shows: each ```console block runs, in order, in a
folder laid out as a fresh clone (a copy of `examples/`), and each command's output is
compared with the block's, figures included (times and run ids aside; tokens within 1%).
A block marked `<!-- file: PATH -->` is a part of the file the commands before it made.
`python tests/console_blocks.py` writes the blocks again from fresh runs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from console_blocks import compare, console_blocks, file_blocks, run, scratch

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Ran:
    """README's commands run once: what each printed, and the folder they ran in."""

    printed: dict[str, str]
    folder: Path


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    folder = scratch(tmp_path_factory.mktemp("clone"))
    printed = {}
    for block in console_blocks(README):
        for command in block.commands:
            printed[command.line] = run(command.line, folder)
    return Ran(printed, folder)


def test_the_readme_shows_commands_with_their_output() -> None:
    shown = [c.line for block in console_blocks(README) for c in block.commands]
    assert shown[0] == "orchestrator run examples/quickstart.yaml"
    assert "orchestrator init my-job --template steps" in shown
    assert "orchestrator eval my-job/job.eval.yaml" in shown
    assert len(set(shown)) == len(shown)


@pytest.mark.slow  # runs README's commands: seconds
@pytest.mark.parametrize(
    "line", [c.line for block in console_blocks(README) for c in block.commands]
)
def test_each_readme_command_prints_what_the_readme_shows(ran: Ran, line: str) -> None:
    (shown,) = [
        c.shown for block in console_blocks(README) for c in block.commands if c.line == line
    ]
    difference = compare(shown, ran.printed[line])
    assert difference is None, f"$ {line}\n{difference}"


@pytest.mark.slow  # runs README's commands: seconds
@pytest.mark.parametrize("path", [path for path, _ in file_blocks(README)])
def test_each_file_the_readme_quotes_holds_what_it_shows(ran: Ran, path: str) -> None:
    (text,) = [text for p, text in file_blocks(README) if p == path]
    assert text in (ran.folder / path).read_text(encoding="utf-8"), path


@pytest.mark.slow  # runs README's commands: seconds
def test_the_picture_is_of_a_run_that_forked_and_wrote_its_brief(ran: Ran) -> None:
    printed = ran.printed["orchestrator run examples/quickstart.yaml"]
    assert "goal/early: completed" in printed and "goal/late: completed" in printed
    assert (ran.folder / "examples" / "quickstart" / "out" / "brief.md").is_file()


def test_every_readme_block_that_shows_output_is_a_console_block_that_runs() -> None:
    for language, body in FENCE.findall(README):
        if language != "console":
            assert not any(line.startswith("$ ") for line in body.splitlines()), body


def test_the_comparison_sets_aside_what_varies_and_nothing_else() -> None:
    shown = (
        "[   0.01s] goal/early: completed (steps 3, tokens 7,365, 0.0s)\n"
        "[   0.02s] goal/late: completed (steps 3, tokens 7,330, 0.0s)\n"
        "job quickstart: completed in 1.1s, 29,625 tokens\n"
        "trace: .orchestrator/runs/20261207-084654-9e8728-quickstart.jsonl\n"
        "baseline  1/1 100%      21%-100%   1.00      19,198      0%     -   0.03"
    )
    varied = (
        "[   0.03s] goal/late: completed (steps 3, tokens 7,331, 0.1s)\n"
        "[   0.03s] goal/early: completed (steps 3, tokens 7,365, 0.1s)\n"
        "job quickstart: completed in 0.7s, 29,601 tokens\n"
        "trace: .orchestrator/runs/20270101-000000-abcdef-quickstart.jsonl\n"
        "baseline  1/1 100%      21%-100%   1.00      19,189      0%     -   0.05"
    )
    assert compare(shown, varied) is None
    for drift in [
        ("29,601 tokens", "31,000 tokens"),  # a token count 5% off
        ("steps 3, tokens 7,331", "steps 4, tokens 7,331"),
        ("1/1 100%", "0/1 0%"),
        ("goal/early", "goal/middle"),
    ]:
        assert compare(shown, varied.replace(*drift)) is not None, drift
    assert compare(shown, varied + "\nwarning: a new line") is not None
