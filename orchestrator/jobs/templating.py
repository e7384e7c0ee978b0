"""Plain substitution for job specs: `{inputs.NAME}`, `{steps.ID.output}` and
`{steps.ID.output.FIELD}` (a field of a step's structured answer, `.`-separated, a list's item
by its index: `{steps.read.output.items.0.name}`), nothing else.

There is no expression language and no code: a reference is replaced by a value, once, and
the value is never read as a template itself. A field that is text is put in as it is; any
other value (a number, a list, an object) as its JSON, and a field the answer left out as
`null`. `{{` and `}}` stand for literal braces; any
other brace is an error, so a typo cannot silently reach the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

NAME = r"[A-Za-z0-9_][A-Za-z0-9_-]*"
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_INPUT = re.compile(rf"inputs\.({NAME})")
_STEP_OUTPUT = re.compile(rf"steps\.({NAME})\.output((?:\.{NAME})*)")
_EXPECTED = (
    "expected {inputs.NAME}, {steps.ID.output} or {steps.ID.output.FIELD}; "
    "write {{ and }} for literal braces"
)


class TemplateError(ValueError):
    """A template is malformed; the message says where and what was expected."""


@dataclass(frozen=True)
class Reference:
    """`{inputs.NAME}` (kind "inputs") or `{steps.ID.output}` (kind "steps"), with the
    `field` path into a structured answer when one is named."""

    kind: Literal["inputs", "steps"]
    name: str
    field: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind == "inputs":
            return f"{{inputs.{self.name}}}"
        return f"{{steps.{'.'.join((self.name, 'output', *self.field))}}}"


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

    def render(
        self,
        inputs: Mapping[str, str],
        outputs: Mapping[str, str],
        data: Mapping[str, Any] | None = None,
    ) -> str:
        """Substitute every reference; a value missing from `inputs`/`outputs` (or, for a
        field, from `data`: steps' structured answers as JSON values) is a KeyError."""
        pieces = []
        for part in self.parts:
            if isinstance(part, str):
                pieces.append(part)
            elif part.kind == "inputs":
                pieces.append(_lookup(inputs, part, "input"))
            elif part.field:
                pieces.append(_field(_lookup(data or {}, part, "structured output of step"), part))
            else:
                pieces.append(_lookup(outputs, part, "output of step"))
        return "".join(pieces)


def _reference(inner: str) -> Reference:
    name = inner.strip()
    if match := _INPUT.fullmatch(name):
        return Reference("inputs", match.group(1))
    if match := _STEP_OUTPUT.fullmatch(name):
        field = tuple(part for part in match.group(2).split(".") if part)
        return Reference("steps", match.group(1), field)
    raise TemplateError(f"{{{inner}}} is not a reference; {_EXPECTED}")


def _field(value: Any, reference: Reference) -> str:
    """The field `reference` names in a structured answer, as text."""
    for part in reference.field:
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            value = None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _lookup(values: Mapping[str, Any], reference: Reference, what: str) -> Any:
    try:
        return values[reference.name]
    except KeyError:
        raise KeyError(f"no value for {reference}: {what} {reference.name!r} not given") from None
