"""A JSON Schema for answers, compiled once with bounds, and the validator that holds to them.

An output schema can come from a model (a `fork` task's `output_schema`) or from a file a
spec names, so it is read as untrusted input. A schema can make checking one answer take
forever: a `$ref` that leads back to itself without going into the answer (`{"$ref": "#"}`,
a -> b -> a), `$defs` that each use the next twice (forty levels are 2^40 checks), a `pattern`
that Python's `re` matches in exponential time (`^(a+)+$`). Python's `re` holds the
interpreter while it matches and a thread cannot be stopped, so the cure is bounds, checked
once when the schema is compiled (`compile_schema`), before any answer is read:

- its JSON text is at most `MAX_SCHEMA_BYTES`, nested at most `MAX_SCHEMA_DEPTH` deep;
- it is JSON Schema (draft 4 to 2020-12) whose every `$ref` is a pointer inside it (`#`,
  `#/$defs/...`): nothing is fetched, and what moves where a ref points (`$id` below the top,
  `$dynamicRef`, `$recursiveRef`) is refused, as are `unevaluatedProperties` and
  `unevaluatedItems`, whose checks re-walk the schema for every value;
- no `$ref` cycle stays on the same value: checking it never ends. A recursive schema whose
  cycle goes into the answer (a tree node whose `children` items are nodes) is fine: the
  answer is finite;
- with each `$ref` counted as the schema it points to, it holds at most
  `MAX_EXPANDED_SCHEMAS` schemas and is at most `MAX_SCHEMA_DEPTH` deep (a recursion adds
  nothing): a chain of `$defs` that doubles per level is measured (memoised), never walked;
- every `pattern` and `patternProperties` key compiles with RE2, which matches in time linear
  in the text; one RE2 cannot take (a backreference, lookaround) is refused.

Answers are then checked by the schema's draft's validator with `pattern`,
`patternProperties` and `additionalProperties` on those RE2 patterns, `uniqueItems` in linear
time, and a meter: each keyword checked costs one (plus one per entry of a list or map it
holds, and `ERROR_COST` per failure found), and past `MAX_CHECKS` the check stops
(`TooCostly`): no answer keeps it going, however its parts multiply the schema's branches
(an `anyOf` of two recursive branches is 2^40 checks of a list nested 40 deep). The caller
checks answers in a worker thread (agent/output.py), so the event loop goes on meanwhile.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import jsonschema
import re2
from jsonschema.exceptions import ValidationError

from ..errors import ConfigError

MAX_SCHEMA_BYTES = 64_000
"""The longest output schema, as JSON text (checking one against its metaschema takes about
0.4 s on a 2-core machine at this size; a fork's check holds the event loop that long)."""
MAX_SCHEMA_DEPTH = 64
"""How deep an output schema may nest: its JSON (objects and arrays), and its schemas with
every `$ref` followed."""
MAX_EXPANDED_SCHEMAS = 100_000
"""How many schemas an output schema may hold with every `$ref` counted as what it points to."""
MAX_CHECKS = 200_000
"""How much checking one answer may take: one per keyword checked, plus one per entry of a
list or map it holds, plus `ERROR_COST` per failure it finds."""
ERROR_COST = 10
"""What a failure costs the check: making its message and keeping it take about ten times
the work of a keyword that holds."""

_DRAFTS: tuple[type[Any], ...] = (
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
    jsonschema.Draft201909Validator,
    jsonschema.Draft202012Validator,
)
_REFUSED = {
    "$dynamicRef": "it moves where refs point; use $ref to #/$defs/...",
    "$recursiveRef": "it moves where refs point; use $ref to #/$defs/...",
    "unevaluatedProperties": "use additionalProperties",
    "unevaluatedItems": "use items",
}
# Where a schema holds schemas: checked on the same value, on the value's parts, or on none
# (aside: $defs, reached only through a $ref).
_Kind = Literal["same", "into", "aside"]
_SAME_ONE = ("not", "if", "then", "else")
_SAME_LIST = ("allOf", "anyOf", "oneOf")
_SAME_MAP = ("dependentSchemas", "dependencies")
_INTO_ONE = ("items", "additionalItems", "contains", "propertyNames", "additionalProperties")
_INTO_LIST = ("items", "prefixItems")
_INTO_MAP = ("properties", "patternProperties")
_ASIDE_MAP = ("$defs", "definitions")
_WIDE = frozenset(("properties", "patternProperties", "dependentSchemas", "dependencies"))


class TooCostly(Exception):
    """Checking an answer went past `MAX_CHECKS`."""


@dataclass
class _Check:
    """One answer's check: the work left, and the schema's patterns compiled with RE2."""

    left: int
    patterns: Mapping[str, Any]

    def spend(self, cost: int) -> None:
        self.left -= cost
        if self.left < 0:
            raise TooCostly


# The check under way in this thread (keyword functions are handed only the validator).
_CHECK: contextvars.ContextVar[_Check] = contextvars.ContextVar("schema_check")


@dataclass(frozen=True)
class _Edge:
    """A schema inside another: where (a JSON pointer), and what it is checked on."""

    where: str
    child: Any
    kind: _Kind


class BoundedSchema:
    """A compiled output schema: `mismatches(value)` lists where a JSON value breaks it."""

    def __init__(self, validator: Any, patterns: Mapping[str, Any]) -> None:
        self._validator = validator
        self._patterns = patterns

    def mismatches(self, value: Any) -> list[tuple[str, str]]:
        """(field path, problem) pairs, by path; raises TooCostly past `MAX_CHECKS`."""
        token = _CHECK.set(_Check(MAX_CHECKS, self._patterns))
        try:
            errors = list(self._validator.iter_errors(value))
        finally:
            _CHECK.reset(token)
        errors.sort(key=lambda e: [str(part) for part in e.absolute_path])
        return [(".".join(str(p) for p in e.absolute_path), e.message) for e in errors]


def compile_schema(schema: Mapping[str, Any]) -> BoundedSchema:
    """`schema` checked against the bounds and compiled; ConfigError saying what breaks them."""
    given = dict(schema)
    _check_size(given)
    kind: Any = jsonschema.validators.validator_for(given, jsonschema.Draft202012Validator)
    if kind not in _DRAFTS:
        raise ConfigError(f"the output schema's $schema {given.get('$schema')!r} is not supported")
    try:
        kind.check_schema(given)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(top)"
        raise ConfigError(
            f"the output schema is not valid JSON Schema at {where}: {exc.message}"
        ) from None
    nodes = _schema_nodes(given, draft4=kind is jsonschema.Draft4Validator)
    patterns = _patterns(nodes)
    _check_cycles(nodes)
    _check_expansion(given, nodes)
    return BoundedSchema(_metered(kind)(given), patterns)


def _check_size(schema: dict[str, Any]) -> None:
    """Depth first (measured without recursion), then the length of the JSON text."""
    pending: list[tuple[Any, int]] = [(schema, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise ConfigError(
                f"the output schema is nested more than {MAX_SCHEMA_DEPTH} deep (objects and "
                "arrays)"
            )
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)
    size = len(json.dumps(schema, default=str))
    if size > MAX_SCHEMA_BYTES:
        raise ConfigError(
            f"the output schema is {size:,} characters of JSON; at most {MAX_SCHEMA_BYTES:,} "
            "are read"
        )


def _subschemas(node: Any, where: str) -> Iterator[_Edge]:
    """The schemas `node` holds (a schema already checked against its metaschema)."""
    if not isinstance(node, dict):
        return

    def at(*parts: object) -> str:
        return "/".join([where, *(str(p).replace("~", "~0").replace("/", "~1") for p in parts)])

    groups: tuple[tuple[_Kind, Sequence[str], Sequence[str], Sequence[str]], ...] = (
        ("same", _SAME_ONE, _SAME_LIST, _SAME_MAP),
        ("into", _INTO_ONE, _INTO_LIST, _INTO_MAP),
        ("aside", (), (), _ASIDE_MAP),
    )
    for kind, ones, lists, maps in groups:
        for key in ones:
            if isinstance(node.get(key), dict | bool):
                yield _Edge(at(key), node[key], kind)
        for key in lists:
            if isinstance(node.get(key), list):
                yield from (_Edge(at(key, i), sub, kind) for i, sub in enumerate(node[key]))
        for key in maps:
            if isinstance(node.get(key), dict):
                for name, sub in node[key].items():
                    if isinstance(sub, dict | bool):  # `dependencies` may list names instead
                        yield _Edge(at(key, name), sub, kind)


@dataclass
class _Node:
    where: str
    schema: Any
    edges: list[_Edge]
    ref: Any = None  # what its `$ref` points to


def _schema_nodes(root: dict[str, Any], *, draft4: bool) -> dict[int, _Node]:
    """Every schema of the document by id, each with its place, its schemas and its `$ref`'s
    target; ConfigError for a ref that does not point at a schema inside it, or a refused
    keyword."""
    nodes: dict[int, _Node] = {}
    pending: list[tuple[Any, str]] = [(root, "#")]
    while pending:
        schema, where = pending.pop()
        if id(schema) in nodes:
            continue
        node = _Node(where, schema, list(_subschemas(schema, where)))
        nodes[id(schema)] = node
        pending.extend((edge.child, edge.where) for edge in node.edges)
        if not isinstance(schema, dict):
            continue
        for keyword, why in _REFUSED.items():
            if keyword in schema:
                raise ConfigError(f"the output schema's {keyword} at {where} is refused: {why}")
        for keyword in ("$id", "id") if draft4 else ("$id",):
            if schema is not root and isinstance(schema.get(keyword), str):
                raise ConfigError(
                    f"the output schema's {keyword} at {where} is refused: below the top it "
                    "moves where refs point"
                )
    for node in nodes.values():
        if isinstance(node.schema, dict) and "$ref" in node.schema:
            node.ref = _target(root, node.schema["$ref"], nodes)
    return nodes


def _target(root: dict[str, Any], ref: object, nodes: Mapping[int, _Node]) -> Any:
    """The schema a `$ref` points to inside `root`; ConfigError when it points elsewhere."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise ConfigError(
            f"the output schema has a $ref that cannot be resolved: {ref!r} (only refs inside "
            "the schema, #/..., are read)"
        )
    node: Any = root
    for raw in unquote(ref[2:]).split("/") if ref.startswith("#/") else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ConfigError(f"the output schema has a $ref that cannot be resolved: {ref!r}")
    if ref != "#" and not ref.startswith("#/"):
        raise ConfigError(f"the output schema has a $ref that cannot be resolved: {ref!r}")
    if id(node) not in nodes or not isinstance(node, dict | bool):
        raise ConfigError(f"the output schema's $ref {ref!r} does not point at a schema")
    return node


def _patterns(nodes: dict[int, _Node]) -> dict[str, Any]:
    """Every pattern of the schema compiled with RE2; ConfigError naming one it cannot take."""
    options = re2.Options()
    options.log_errors = False
    compiled: dict[str, Any] = {}
    for node in nodes.values():
        if not isinstance(node.schema, dict):
            continue
        found = [(f"{node.where}/pattern", node.schema.get("pattern"))]
        extra = node.schema.get("patternProperties")
        if isinstance(extra, dict):
            found += [(f"{node.where}/patternProperties", key) for key in extra]
        for where, pattern in found:
            if not isinstance(pattern, str) or pattern in compiled:
                continue
            try:
                compiled[pattern] = re2.compile(pattern, options)
            except re2.error as exc:
                reason = (
                    exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
                )
                raise ConfigError(
                    f"the output schema's pattern {pattern!r} at {where} is refused: patterns "
                    f"run on RE2, in time linear in the text, and RE2 cannot take it ({reason}); "
                    "write it without backreferences (\\1) or lookaround ((?=...), (?<=...))"
                ) from None
    return compiled


def _same_value_edges(node: _Node, nodes: dict[int, _Node]) -> Iterator[_Node]:
    """The schemas checked on the same value as `node`: its `$ref`'s target, its allOf..."""
    if node.ref is not None:
        yield nodes[id(node.ref)]
    yield from (nodes[id(e.child)] for e in node.edges if e.kind == "same")


def _check_cycles(nodes: dict[int, _Node]) -> None:
    """Refuse a cycle of refs and in-place schemas that never goes into a part of the value."""
    done: set[int] = set()
    for start in nodes.values():
        if id(start.schema) in done:
            continue
        path: list[_Node] = [start]
        on_path = {id(start.schema)}
        branches = [iter(list(_same_value_edges(start, nodes)))]
        while branches:
            step = next(branches[-1], None)
            if step is None:
                branches.pop()
                finished = path.pop()
                on_path.discard(id(finished.schema))
                done.add(id(finished.schema))
                continue
            if id(step.schema) in on_path:
                loop = path[[id(n.schema) for n in path].index(id(step.schema)) :] + [step]
                shown = " -> ".join(n.where for n in loop)
                raise ConfigError(
                    f"the output schema refers to itself without going into the answer "
                    f"({shown}): checking it would never end"
                )
            if id(step.schema) in done:
                continue
            path.append(step)
            on_path.add(id(step.schema))
            branches.append(iter(list(_same_value_edges(step, nodes))))


def _check_expansion(root: dict[str, Any], nodes: dict[int, _Node]) -> None:
    """Measure the schema with each `$ref` counted as what it points to (memoised, without
    recursion); a ref back to a schema being measured (a recursion into the answer) adds
    nothing more."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()

    def children(node: _Node) -> list[_Node]:
        found = [nodes[id(e.child)] for e in node.edges if e.kind != "aside"]
        return [nodes[id(node.ref)], *found] if node.ref is not None else found

    stack: list[tuple[_Node, bool]] = [(nodes[id(root)], False)]
    while stack:
        node, measured = stack.pop()
        key = id(node.schema)
        if measured:
            on_path.discard(key)
            parts = [c for c in children(node) if id(c.schema) in size]
            size[key] = 1 + sum(size[id(c.schema)] for c in parts)
            depth[key] = 1 + max((depth[id(c.schema)] for c in parts), default=0)
            if size[key] > MAX_EXPANDED_SCHEMAS:
                raise ConfigError(
                    f"the output schema at {node.where} expands to {size[key]:,} schemas with "
                    f"its $refs followed; at most {MAX_EXPANDED_SCHEMAS:,} are checked"
                )
            if depth[key] > MAX_SCHEMA_DEPTH:
                raise ConfigError(
                    f"the output schema at {node.where} is more than {MAX_SCHEMA_DEPTH} schemas "
                    "deep with its $refs followed"
                )
            continue
        if key in size or key in on_path:
            continue  # measured already, or a recursion: counted where it closes
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children(node) if id(child.schema) not in size)


Keyword = Callable[[Any, Any, Any, Any], Any]


def _metered(kind: Any) -> Any:
    """The validator class `kind` with every keyword metered, and the keywords that match
    patterns or compare items on RE2 and in linear time."""

    def metered(name: str, check: Keyword) -> Keyword:
        wide = name in _WIDE

        def run(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            meter = _CHECK.get()
            meter.spend(1 + (len(value) if wide or isinstance(value, list) else 0))
            for error in check(validator, value, instance, schema) or ():
                meter.spend(ERROR_COST)
                yield error

        return run

    own: dict[str, Keyword] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    keywords = {
        name: metered(name, own.get(name, check)) for name, check in kind.VALIDATORS.items()
    }
    validators: Any = jsonschema.validators  # its stub leaves `extend` untyped
    return validators.extend(kind, validators=keywords)


def _pattern(validator: Any, value: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _CHECK.get().patterns[value].search(instance):
        yield ValidationError(f"{_shown(instance)} does not match {value!r}")


def _pattern_properties(
    validator: Any, value: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    check = _CHECK.get()
    check.spend(len(value) * len(instance))
    for key, subschema in value.items():
        matcher = check.patterns[key]
        for name, part in instance.items():
            if matcher.search(name):
                yield from validator.descend(part, subschema, path=name, schema_path=key)


def _additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    check = _CHECK.get()
    known = schema.get("properties", {})
    matchers = [check.patterns[key] for key in schema.get("patternProperties", {})]
    check.spend(len(matchers) * len(instance))
    extras = [
        name for name in instance if name not in known and not any(m.search(name) for m in matchers)
    ]
    if validator.is_type(value, "object"):
        for name in extras:
            yield from validator.descend(instance[name], value, path=name)
    elif not value and extras:
        shown = ", ".join(repr(name) for name in sorted(extras))
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(
            f"Additional properties are not allowed ({_cut(shown)} {verb} unexpected)"
        )


def _unique_items(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if value and validator.is_type(instance, "array"):
        _CHECK.get().spend(len(instance))
        if len({_canonical(item) for item in instance}) < len(instance):
            yield ValidationError(f"{_shown(instance)} has non-unique elements")


def _canonical(value: Any) -> Any:
    """A hashable key equal for values JSON Schema calls equal (1 and 1.0; not true and 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("string", value)


MAX_SHOWN = 80


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def _shown(value: Any) -> str:
    return _cut(repr(value))
