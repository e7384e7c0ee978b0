"""`orchestrator completion bash|zsh`: a shell script that completes commands and flags.

    source <(orchestrator completion bash)      # in ~/.bashrc
    source <(orchestrator completion zsh)       # in ~/.zshrc

The script is written out from the parser itself (every command, its actions, its flags and
the choices of its arguments), so it never runs Python while you press Tab and never goes
stale for the version that printed it. Words that are not flags complete as file names. zsh
loads it through its bash compatibility (`bashcompinit`).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh")

BASH_FUNCTION = """\
_orchestrator() {
    local cur="${COMP_WORDS[COMP_CWORD]}" command="" action="" word i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        [[ $word == -* ]] && continue
        if [[ -z $command ]]; then command=$word
        elif [[ -z $action ]]; then action=$word
        fi
    done
    local words
    case "$command" in
%(cases)s
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -o bashdefault -F _orchestrator orchestrator
"""
ZSH_PREFIX = """\
#compdef orchestrator
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
"""


@dataclass
class Words:
    """What one level of the command line completes to: its flags, its actions (the next
    command word) and the choices of its first argument."""

    flags: list[str] = field(default_factory=list)
    actions: dict[str, Words] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for SHELL; load it with "
        "`source <(orchestrator completion bash)` in ~/.bashrc (zsh: ~/.zshrc).",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    completion.set_defaults(handler=completion_command)


def completion_command(args: argparse.Namespace) -> int:
    from . import build_parser

    print(script(args.shell, build_parser()), end="")
    return 0


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` ("bash" or "zsh") of the command line `parser`."""
    top = words_of(parser)
    cases = [_case('""', [*top.actions, *top.flags])]
    for name, command in top.actions.items():
        cases.append(_command_case(name, command))
    bash = BASH_FUNCTION % {"cases": "\n".join(cases)}
    return bash if shell == "bash" else ZSH_PREFIX + bash


def words_of(parser: argparse.ArgumentParser) -> Words:
    """The flags, actions and choices of `parser`, its sub-commands' nested in `actions`."""
    found = Words()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.actions = {name: words_of(sub) for name, sub in action.choices.items()}
        elif action.option_strings:
            found.flags.extend(action.option_strings)
        elif action.choices and not found.choices:
            found.choices = [str(choice) for choice in action.choices]
    return found


def _command_case(name: str, command: Words) -> str:
    if not command.actions:
        return _case(shlex.quote(name), [*command.choices, *command.flags], indent=8)
    inner = [_case('""', [*command.actions, *command.flags], indent=12)]
    inner += [
        _case(shlex.quote(action), [*sub.choices, *sub.flags], indent=12)
        for action, sub in command.actions.items()
    ]
    body = "\n".join(inner)
    return (
        f'        {shlex.quote(name)})\n            case "$action" in\n{body}\n            esac ;;'
    )


def _case(pattern: str, words: list[str], *, indent: int = 8) -> str:
    pad = " " * indent
    return f'{pad}{pattern}) words="{" ".join(words)}" ;;'
