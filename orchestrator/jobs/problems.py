"""A job spec's problems as a user reads them: pydantic's errors translated into `Problem`s
(errors.py: a `SpecError` holds them). The `loc` tuple becomes a path such as
`steps[1].depends_on[0]`, and the error type becomes a sentence that says what was expected
and what was found. Loaded only when a spec has a problem to say.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from ..errors import Problem
from ..tasks import suggest


def format_path(loc: Sequence[str | int]) -> str:
    """`("steps", 1, "depends_on", 0)` -> `steps[1].depends_on[0]`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def describe(value: Any) -> str:
    """A value as a user would name it: `'EMEA'`, `the number 3`, `a list`."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def problems_from(error: ValidationError, model: type[BaseModel]) -> list[Problem]:
    """Translate pydantic's errors on `model` into Problems with paths and plain messages.

    A field that takes one of several kinds (`cases: list[Case] | Location`) gets an error
    from each kind pydantic tried, under a tag naming the kind in pydantic's words
    (`list[Case]`, `function-after[...]`): the tags are left out of the path, and where the
    value was of one kind (a list) only that kind's errors are said; where it was of none,
    one problem says every kind the field takes."""
    problems = []
    tried: dict[tuple[str | int, ...], list[ErrorDetails]] = {}
    for detail in error.errors():
        where = next((i for i, part in enumerate(detail["loc"]) if _is_tag(part)), None)
        if where is None:
            problems.append(_problem(detail, model))
            continue
        loc = detail["loc"]
        untagged = ErrorDetails(**{**detail, "loc": tuple(p for p in loc if not _is_tag(p))})
        tried.setdefault(tuple(loc[:where]), []).append(untagged)
    for field, details in tried.items():
        inside = [d for d in details if d["loc"] != field or d["type"] not in _EXPECTED]
        if inside:
            problems += [_problem(d, model) for d in inside]
            continue
        kinds = dict.fromkeys(_EXPECTED[d["type"]].removeprefix("expected ") for d in details)
        value = details[0].get("input")
        problems.append(
            Problem(format_path(field), f"expected {' or '.join(kinds)}, got {describe(value)}")
        )
    return problems


_TAG = re.compile(r"[a-z][a-z-]*\[.*\]|[A-Z]\w*|str|int|float|bool|none", re.DOTALL)


def _is_tag(part: str | int) -> bool:
    """Whether a part of an error's location names a kind pydantic tried, not a field."""
    return isinstance(part, str) and _TAG.fullmatch(part) is not None


def _problem(detail: ErrorDetails, model: type[BaseModel]) -> Problem:
    loc, message = detail["loc"], _message(detail, model)
    if loc[-1:] == ("[key]",):
        # pydantic puts a mapping key's own error at (..., key, "[key]").
        loc, message = loc[:-2], f"key {loc[-2]!r}: {message}"
    return Problem(format_path(loc), message)


_EXPECTED = {
    "string_type": "expected text",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected a mapping (key: value)",
    "model_type": "expected a mapping of fields (key: value)",
    "model_attributes_type": "expected a mapping of fields (key: value)",
    "path_type": "expected a path",
}


def _message(detail: ErrorDetails, model: type[BaseModel]) -> str:
    kind, value, ctx = detail["type"], detail.get("input"), detail.get("ctx") or {}
    if kind == "missing":
        return "required, but missing" + _misspelt(detail["loc"][-1], value)
    if kind == "extra_forbidden":
        return _unknown_field(detail["loc"], model)
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {describe(value)}{_hint(kind, value)}"
    if kind in ("greater_than", "greater_than_equal"):
        bound = f"above {ctx['gt']}" if "gt" in ctx else f"at least {ctx.get('ge')}"
        return f"expected a number {bound}, got {describe(value)}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        return (
            f"expected a name of letters, digits, '_' and '-' (not starting with '-'), "
            f"got {describe(value)}"
        )
    if kind in ("value_error", "key_refused", "misplaced_option"):
        return str(ctx.get("error", detail["msg"]))
    return f"{detail['msg']}, got {describe(value)}"


def _misspelt(field: str | int, given: Any) -> str:
    """For a missing field, the key beside it that looks like it misspelt (`promt`)."""
    if not isinstance(given, dict) or not isinstance(field, str):
        return ""
    keys = [k for k in given if isinstance(k, str) and k != field]
    close = difflib.get_close_matches(field, keys, n=1, cutoff=0.75)
    return f" (is {close[0]!r} it, misspelt?)" if close else ""


def _hint(kind: str, value: Any) -> str:
    if kind == "string_type" and isinstance(value, int | float | bool):
        return " (put it in quotes)"
    if kind == "list_type" and isinstance(value, str):
        return f" (write [{value}])"
    return ""


def _unknown_field(loc: Sequence[str | int], model: type[BaseModel]) -> str:
    name = str(loc[-1])
    owner = _model_at(model, loc[:-1])
    if owner is None:
        return "unknown field"
    fields = list(owner.model_fields)
    return f"unknown field {name!r}{suggest(name, fields)}; expected one of: {', '.join(fields)}"


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the value at `loc`, walking field annotations."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        if current is None or part not in current.model_fields:
            return None
        current = _inner_model(current.model_fields[part].annotation)
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None
