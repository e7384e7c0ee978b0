"""The parser class of every command: typos get a "did you mean", abbreviations are off.

argparse would take `--mod` for `--model` (any unique prefix): a script written that way
breaks the day a new flag shares the prefix, and a typo that happens to be a prefix runs
something else than was meant. So prefixes are refused (`allow_abbrev=False`), and an
unknown option or command is answered with the closest known ones (difflib), e.g.
`unrecognized arguments: --sett a=b (did you mean --set?)`.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

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
