"""The docs say what the code does: checks that catch the next drift between them."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from orchestrator.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command and command action (`trace show`), with its parser."""
    parser = build_parser(None)
    found: dict[str, argparse.ArgumentParser] = {}
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in sub.choices.items():
        actions = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if actions:
            found.update({f"{name} {a}": p for a, p in actions[0].choices.items()})
        else:
            found[name] = command
    return found


def synopses() -> list[str]:
    """The first cell of each row of README's command table."""
    return re.findall(r"^\| `(orchestrator [^|]*(?:\\\|[^|]*)*)` \|", README, re.MULTILINE)


@pytest.mark.parametrize("command", sorted(commands()))
def test_the_readme_command_table_names_every_flag(command: str) -> None:
    name, _, action = command.partition(" ")
    rows = [
        row
        for row in synopses()
        if row.split()[1] == name and (not action or re.search(rf"\b{action}\b", row))
    ]
    assert rows, f"README's command table has no row for `orchestrator {command}`"
    text = " ".join(rows)
    missing = [
        "/".join(a.option_strings)
        for a in commands()[command]._actions
        if a.option_strings
        and "--help" not in a.option_strings
        and not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text) for o in a.option_strings)
    ]
    assert not missing, f"`orchestrator {command}` in README lacks {missing}"


def test_the_readme_lists_every_core_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [re.split(r"[<>=\[; ]", d, maxsplit=1)[0] for d in project["dependencies"]]
    (line,) = [ln for ln in README.split("\n\n") if ln.startswith("Core dependencies:")]
    line = " ".join(line.split()).lower()
    missing = [n for n in names if n.lower() not in line]
    assert not missing, f"README's core dependencies lack {missing}"
