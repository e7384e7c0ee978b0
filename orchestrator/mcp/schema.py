"""A server's `inputSchema`, made fit for every provider, and arguments checked against it.

Providers differ in what JSON Schema they take: some reject `$ref`/`$defs`, most want an
object at the top. So local references are inlined, `$defs` dropped, and a schema that is not
an object schema is wrapped as one. Inlining is bounded in depth (a recursive reference is cut
to `{}` past a small depth) and in total size: references that fan out (each definition using
the next twice, twenty deep, is a million copies from a kilobyte) stop being inlined once the
schema holds `MAX_SCHEMA_NODES` objects and lists, and the schema's description says it was
cut. Arguments are validated (jsonschema, which the `[mcp]` extra brings) against the server's
own schema before the call, so a missing field comes back as the usual invalid-arguments
observation naming it. `masked` keeps a server's secrets out of any JSON value it sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_REF_DEPTH = 8
MAX_SCHEMA_NODES = 2_000
CUT_NOTE = (
    "(Parts of this schema were left out: its references expand past {limit:,} objects; "
    "the server checks the arguments against its full schema.)"
)
_DROPPED = ("$defs", "definitions", "$schema", "$id")


def normalise(schema: object) -> dict[str, Any]:
    """An object schema without `$ref`/`$defs`, ready to send to any provider."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    defs = {**_mapping(schema.get("definitions")), **_mapping(schema.get("$defs"))}
    inliner = _Inliner(defs)
    top = dict(inliner.inline(schema, 0))
    top.setdefault("type", "object")
    if top.get("type") == "object":
        top.setdefault("properties", {})
    if inliner.cut:
        note = CUT_NOTE.format(limit=MAX_SCHEMA_NODES)
        described = top.get("description")
        top["description"] = f"{described}\n{note}" if isinstance(described, str) else note
    return top


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class _Inliner:
    """Inlines references into new objects (the server's schema is never changed), counting
    the objects and lists it makes; past the budget, references are no longer followed."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.left = MAX_SCHEMA_NODES
        self.cut = False

    def inline(self, node: Any, depth: int) -> Any:
        if not isinstance(node, dict | list):
            return node
        self.left -= 1
        if isinstance(node, list):
            return [self.inline(item, depth) for item in node]
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _resolve(ref, self.defs)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if target is not None and self.left <= 0:
                self.cut = True
            if target is None or depth >= MAX_REF_DEPTH or self.left <= 0:
                return self.inline(rest, depth)  # unknown, too deep or too much: looser
            return {**self.inline(target, depth + 1), **self.inline(rest, depth)}
        return {
            key: self.inline(value, depth)
            if key != "properties"
            else self._properties(value, depth)
            for key, value in node.items()
            if key not in _DROPPED and key != "title"  # titles cost tokens and tell nothing
        }

    def _properties(self, node: Any, depth: int) -> Any:
        """A `properties` object: its keys are field names (a field may be called `title`)."""
        if not isinstance(node, dict):
            return node
        self.left -= 1
        return {name: self.inline(value, depth) for name, value in node.items()}


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
            value = error.validator_value
            required = [str(n) for n in value] if isinstance(value, list) else []
            given = error.instance if isinstance(error.instance, dict) else {}
            missing = [n for n in required if n not in given]
            for name in missing:
                lines.append(f"- {'.'.join(filter(None, [where, name]))}: field required")
        else:
            lines.append(f"- {where or '(arguments)'}: {error.message}")
    return lines


def masked(value: Any, mask: Callable[[str], str]) -> Any:
    """A JSON value with `mask` applied to every string in it, keys included."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(str(k)): masked(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(item, mask) for item in value]
    return value
