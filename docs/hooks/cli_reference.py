"""The command-line reference, rendered from the parser itself (an MkDocs hook).

A page holding the line `<!-- cli-reference -->` gets, in its place, every command of
`orchestrator` (and every action of those that have them: `trace show`, `skills check`, ...)
with its description, its usage line and a table of its arguments: their help, choices and
defaults, as `orchestrator COMMAND --help` prints them. Nothing of it is written by hand, so it
cannot drift from the code; a command added to `orchestrator.cli.COMMANDS` appears at once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

# The reference documents the code beside it, whichever `orchestrator` is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from orchestrator.cli import build_parser  # noqa: E402

MARKER = "<!-- cli-reference -->"
USAGE_WIDTH = 88


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())


def cli_reference() -> str:
    """Every command and action of the command line, as markdown."""
    parser = build_parser()
    parts = [_section(parser, "orchestrator", parser.description, level=2)]
    for name, (command, summary) in _subcommands(parser).items():
        parts.append(_section(command, f"orchestrator {name}", summary, level=2))
        for action, (sub, line) in _subcommands(command).items():
            parts.append(_section(sub, f"orchestrator {name} {action}", line, level=3))
    return "\n".join(parts)


def _subcommands(
    parser: argparse.ArgumentParser,
) -> dict[str, tuple[argparse.ArgumentParser, str | None]]:
    """The commands (or actions) under `parser`, each with its line of help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            return {name: (sub, helps.get(name)) for name, sub in action.choices.items()}
    return {}


def _section(
    parser: argparse.ArgumentParser, title: str, summary: str | None, *, level: int
) -> str:
    lines = [f"{'#' * level} `{title}`", ""]
    text = parser.description or summary
    if text:
        sentence = text[0].upper() + text[1:]
        lines += [sentence if sentence.endswith((".", ")")) else sentence + ".", ""]
    lines += ["```text", _usage(parser).rstrip(), "```", ""]
    # Positional arguments and options in one table; a group of the command's own in its own.
    groups: dict[str | None, list[argparse.Action]] = {}
    for group in parser._action_groups:
        own = group.title not in ("positional arguments", "options")
        groups.setdefault(group.title if own else None, []).extend(
            a for a in group._group_actions if _shown(a)
        )
    for group_title, actions in groups.items():
        if not actions:
            continue
        if group_title is not None:
            lines += [f"*{group_title}*", ""]
        lines += ["| argument | what it does | default |", "| --- | --- | --- |"]
        lines += [_row(parser, action) for action in actions]
        lines.append("")
    return "\n".join(lines)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help()


def _shown(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS and not isinstance(
        action, argparse._SubParsersAction | argparse._HelpAction
    )


def _row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    metavar = _metavar(parser, action)
    if action.option_strings:
        names = ", ".join(f"`{o}{' ' + metavar if metavar else ''}`" for o in action.option_strings)
    else:
        names = f"`{metavar}`"
    help_text = parser._get_formatter()._expand_help(action) if action.help else ""
    return f"| {names} | {_cell(help_text)} | {_default(action)} |"


def _metavar(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    formatter = parser._get_formatter()
    if action.option_strings:
        return formatter._format_args(action, action.dest.upper())
    return formatter._format_args(action, action.dest)


def _default(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or default in (None, argparse.SUPPRESS, [], ()):
        return ""
    return f"`{default}`"


def _cell(text: str) -> str:
    """Text fit for a table cell: one line, its bars escaped."""
    return " ".join(text.split()).replace("|", "\\|")
