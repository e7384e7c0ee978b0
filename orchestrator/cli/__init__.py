"""The `orchestrator` command line. Each command group lives in a module of its own.

`COMMANDS` lists every command, in the order `orchestrator --help` shows them, with the
module that defines it and its line of help. Only the module of the command being run is
imported (with the library behind it): `orchestrator --version` and `--help` import none,
so they answer at once.

Every command's parser is a `Parser`: typos get a "did you mean", abbreviations are off.
argparse would take `--mod` for `--model` (any unique prefix): a script written that way
breaks the day a new flag shares the prefix, and a typo that happens to be a prefix runs
something else than was meant. So prefixes are refused (`allow_abbrev=False`), and an
unknown option or command is answered with the closest known ones (difflib), e.g.
`unrecognized arguments: --sett a=b (did you mean --set?)`.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NoReturn

STARTED = time.time()
"""When the command started (as near as the CLI can tell): `run` reports the time since."""


_UNRECOGNIZED = "unrecognized arguments: "
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` without abbreviations, that suggests close matches for typos."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if message.startswith(_UNRECOGNIZED):
            message += suggestion(message[len(_UNRECOGNIZED) :].split(), option_strings(self))
        found = _INVALID_CHOICE.search(message)
        if found is not None:
            choices = re.findall(r"'([^']*)'", found["choices"])
            message += suggestion([found["word"]], choices)
        super().error(message)


def suggestion(words: Sequence[str], known: Sequence[str]) -> str:
    """` (did you mean X?)` for the first of `words` that resembles one of `known`, else ``."""
    for word in words:
        name = word.split("=", 1)[0]
        flag = name.startswith("-")
        if flag or not any(k.startswith("-") for k in known):
            # Flags share their leading dashes, which make any two look alike: ask for more.
            close = difflib.get_close_matches(name, known, n=2, cutoff=0.7 if flag else 0.6)
            if close:
                return f" (did you mean {' or '.join(close)}?)"
    return ""


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option of `parser` and of the sub-commands registered under it."""
    return sorted({o for action in _actions(parser) for o in action.option_strings})


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _actions(sub)


@dataclass(frozen=True)
class Command:
    """One command: its name, the module under `orchestrator.cli` that registers it, and
    the line `orchestrator --help` shows for it."""

    name: str
    module: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("init", "init", "create a job folder that runs at once, offline"),
    Command("run", "run", "run a job spec"),
    Command("run-batch", "batch", "run a job once per input row (CSV or JSONL)"),
    Command("eval", "evaluate", "run a job's cases in variants side by side, and score them"),
    Command("validate", "jobs", "check a job spec without running anything"),
    Command("schema", "schema", "print the JSON Schema of job specs or eval files, for editors"),
    Command("ask", "ask", "run the planner on one goal, without a job file"),
    Command("resume", "resume", "go on with a killed or interrupted job run, from its trace"),
    Command("trace", "trace", "list runs and summarize one from its trace"),
    Command("report", "report", "write a run's HTML report"),
    Command("serve", "serve", "serve jobs as an A2A agent"),
    Command("skills", "skills", "list, show and check skills"),
    Command("subagents", "subagents", "list, show and check sub-agent definitions"),
    Command("completion", "completion", "print a shell completion script (bash or zsh)"),
)


def build_parser(command: str | None = None) -> Parser:
    """The command line's parser. With `command`, only that command's module is imported and
    its arguments registered; every other command gets its help line alone. Without it, every
    command is registered (for completion scripts and tests)."""
    parser = Parser(
        prog="orchestrator",
        description="Run skills-based multi-agent jobs.",
        epilog="`orchestrator COMMAND --help` shows a command's options.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for entry in COMMANDS:
        if command is None or entry.name == command:
            command_module(entry).register(commands)
        else:
            commands.add_parser(entry.name, help=entry.help)
    return parser


def command_module(entry: Command) -> ModuleType:
    """The module that defines `entry`'s command, imported now."""
    return importlib.import_module(f"{__name__}.{entry.module}")


def _chosen(argv: Sequence[str]) -> str:
    """The command named on the command line (the first word that is not an option), or ""
    (which names none: `orchestrator --help` registers no command's arguments)."""
    return next((word for word in argv if not word.startswith("-")), "")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(_chosen(argv))
        args = parser.parse_args(argv)
        handler = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return 2
        return _dispatch(handler, args)
    except KeyboardInterrupt:
        # Ctrl-C before a run began (a run that began says where its trace is itself).
        print("interrupted", file=sys.stderr)
        return 130


def _dispatch(handler: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    import logging
    import warnings

    from ..errors import SafetyWarning
    from .output import masked_output, silence_stdout

    # Commands print the catalog's warnings themselves: the logger must not repeat them, and
    # neither may Python's display of the SafetyWarnings they also raise.
    logging.getLogger("orchestrator.skills").addHandler(logging.NullHandler())
    warnings.simplefilter("ignore", SafetyWarning)
    try:
        with masked_output():
            return int(handler(args) or 0)
    except BrokenPipeError:
        silence_stdout()  # the reader went away (`orchestrator run ... | head`)
        return 1


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("orchestrator")
    except PackageNotFoundError:
        return "unknown"
