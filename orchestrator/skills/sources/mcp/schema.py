"""A server's `inputSchema`, made fit for every provider, and arguments checked against it.

Providers differ in what JSON Schema they take: some reject `$ref`/`$defs`, most want an
object at the top. So local references are inlined (a recursive one is cut to `{}` past a
small depth), `$defs` dropped, and a schema that is not an object schema is wrapped as one.
Arguments are validated (jsonschema, which the `[mcp]` extra brings) before the call, so a
missing field comes back as the usual invalid-arguments observation naming it.
"""

from __future__ import annotations

import copy
from typing import Any

MAX_REF_DEPTH = 8
_DROPPED = ("$defs", "definitions", "$schema", "$id")


def normalise(schema: object) -> dict[str, Any]:
    """An object schema without `$ref`/`$defs`, ready to send to any provider."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    inlined = _inline(copy.deepcopy(schema), defs, 0)
    top = dict(inlined)
    top.setdefault("type", "object")
    if top.get("type") == "object":
        top.setdefault("properties", {})
    return top


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, defs)
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if target is None or depth >= MAX_REF_DEPTH:
            return _inline(rest, defs, depth)  # unknown or too deep: a looser schema
        return {**_inline(copy.deepcopy(target), defs, depth + 1), **_inline(rest, defs, depth)}
    return {
        key: _inline(value, defs, depth) if key != "properties" else _properties(value, defs, depth)
        for key, value in node.items()
        if key not in _DROPPED and key != "title"  # titles cost tokens and tell nothing
    }


def _properties(node: Any, defs: dict[str, Any], depth: int) -> Any:
    """A `properties` object: its keys are field names (a field may be called `title`)."""
    if not isinstance(node, dict):
        return node
    return {name: _inline(value, defs, depth) for name, value in node.items()}


def _resolve(ref: str, defs: dict[str, Any]) -> dict[str, Any] | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            found = defs.get(ref.removeprefix(prefix))
            return found if isinstance(found, dict) else None
    return None


def problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Each way `arguments` break `schema`, as `- field: what is wrong` lines."""
    import jsonschema

    validator_class = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    try:
        validator = validator_class(schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except jsonschema.SchemaError:
        return []  # the server's schema is broken: let the server judge the arguments
    lines = []
    for error in errors:
        where = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required":
            missing = [n for n in error.validator_value if n not in (error.instance or {})]
            for name in missing:
                lines.append(f"- {'.'.join(filter(None, [where, name]))}: field required")
        else:
            lines.append(f"- {where or '(arguments)'}: {error.message}")
    return lines
