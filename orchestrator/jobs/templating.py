"""Plain substitution for job specs: `{inputs.NAME}` and `{steps.ID.output}`, nothing else.

There is no expression language and no code: a reference is replaced by a value, once, and
the value is never read as a template itself. `{{` and `}}` stand for literal braces; any
other brace is an error, so a typo cannot silently reach the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

NAME = r"[A-Za-z0-9_][A-Za-z0-9_-]*"
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_INPUT = re.compile(rf"inputs\.({NAME})")
_STEP_OUTPUT = re.compile(rf"steps\.({NAME})\.output")
_EXPECTED = "expected {inputs.NAME} or {steps.ID.output}; write {{ and }} for literal braces"


class TemplateError(ValueError):
    """A template is malformed; the message says where and what was expected."""


@dataclass(frozen=True)
class Reference:
    """`{inputs.NAME}` (kind "inputs") or `{steps.ID.output}` (kind "steps")."""

    kind: Literal["inputs", "steps"]
    name: str

    def __str__(self) -> str:
        if self.kind == "inputs":
            return f"{{inputs.{self.name}}}"
        return f"{{steps.{self.name}.output}}"


@dataclass(frozen=True)
class Template:
    """A parsed template: literal text and references, in order."""

    parts: tuple[str | Reference, ...]

    @classmethod
    def parse(cls, text: str) -> Template:
        """Split `text` into literals and references, or raise TemplateError."""
        parts: list[str | Reference] = []
        literal: list[str] = []
        end = 0
        for match in _TOKEN.finditer(text):
            literal.append(text[end : match.start()])
            end = match.end()
            token = match.group(0)
            if token in ("{{", "}}"):
                literal.append(token[0])
            elif match.group(1) is None:
                raise TemplateError(
                    f"unmatched {token!r} at character {match.start() + 1}; "
                    f"write {token * 2} for a literal brace"
                )
            else:
                parts.extend(["".join(literal), _reference(match.group(1))])
                literal = []
        literal.append(text[end:])
        parts.append("".join(literal))
        return cls(tuple(part for part in parts if part != ""))

    @property
    def references(self) -> list[Reference]:
        return [part for part in self.parts if isinstance(part, Reference)]

    def render(self, inputs: Mapping[str, str], outputs: Mapping[str, str]) -> str:
        """Substitute every reference; a value missing from `inputs`/`outputs` is a KeyError."""
        pieces = []
        for part in self.parts:
            if isinstance(part, str):
                pieces.append(part)
            elif part.kind == "inputs":
                pieces.append(_lookup(inputs, part, "input"))
            else:
                pieces.append(_lookup(outputs, part, "output of step"))
        return "".join(pieces)


def _reference(inner: str) -> Reference:
    name = inner.strip()
    if match := _INPUT.fullmatch(name):
        return Reference("inputs", match.group(1))
    if match := _STEP_OUTPUT.fullmatch(name):
        return Reference("steps", match.group(1))
    raise TemplateError(f"{{{inner}}} is not a reference; {_EXPECTED}")


def _lookup(values: Mapping[str, str], reference: Reference, what: str) -> str:
    try:
        return values[reference.name]
    except KeyError:
        raise KeyError(f"no value for {reference}: {what} {reference.name!r} not given") from None
