"""The job spec's and the eval file's fields, rendered from their JSON Schemas (an MkDocs hook).

A page holding the line `<!-- spec-reference: job -->` (or `eval`) gets, in its place, a
section per part of that file (the top level, a step, the budget, ...): what the part is, where
it stands in the file, and a table of its fields with their types, defaults and what they do.
The source is the schema `orchestrator schema job|eval` prints for editors, itself generated
from the pydantic models and their attribute docstrings: the reference, the editor's checks
and the loader cannot disagree, and shorthands show as the types users may write
(`path or SpecSkillFolder`). A part of the job spec that an eval file holds too (an inline
`job:`) links to the job page rather than being written twice.
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# The reference documents the code beside it, whichever `orchestrator` is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from orchestrator.eval import eval_schema  # noqa: E402
from orchestrator.jobs import job_schema  # noqa: E402

MARKER = re.compile(r"^<!-- spec-reference: (?P<kind>[a-z]+) -->$", re.MULTILINE)
PAGES: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "job": (job_schema, "reference/job-spec-fields.md"),
    "eval": (eval_schema, "reference/eval-fields.md"),
}
"""Each kind of file: its schema, and the page its parts are described on."""
ROOT_NAMES = {"job": "Job", "eval": "EvalSpec"}
"""The name each file's top level goes by when another file holds it (an inline job)."""


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def rendered(found: re.Match[str]) -> str:
        kind = found["kind"]
        if kind not in PAGES:
            known = ", ".join(PAGES)
            raise ValueError(f"{page.file.src_uri}: no spec reference {kind!r} (known: {known})")
        return SpecPage(kind, page.file.src_uri).render()

    return MARKER.sub(rendered, markdown)


class SpecPage:
    """The reference of one kind of file, rendered for the page at `src_uri`."""

    def __init__(self, kind: str, src_uri: str) -> None:
        self.kind = kind
        self.src_uri = src_uri
        self.schema = PAGES[kind][0]()
        self.defs: dict[str, Any] = self.schema.get("$defs", {})
        # Each part is described on the page of the first kind of file that holds it (a job's
        # parts on the job page, an eval holding a job inline links there): name -> page.
        owners: dict[str, str] = {}
        for other, (schema_of, page) in PAGES.items():
            for name in [ROOT_NAMES[other], *schema_of().get("$defs", {})]:
                owners.setdefault(name, page)
        self.elsewhere = {name: page for name, page in owners.items() if page != PAGES[kind][1]}

    def render(self) -> str:
        places = self._places()
        parts = [self._part(ROOT_NAMES[self.kind], self.schema, [])]
        parts += [self._part(name, self.defs[name], where) for name, where in places.items()]
        return "\n".join(parts)

    def _places(self) -> dict[str, list[str]]:
        """Every part this page describes, in the order a reader meets it in the file, with
        where it stands (`steps[]`, `` `model` of [Step](#step) ``)."""
        places: dict[str, list[str]] = {}
        pending: list[str] = [ROOT_NAMES[self.kind]]
        while pending:
            parent = pending.pop(0)
            node = self.schema if parent == ROOT_NAMES[self.kind] else self.defs[parent]
            body, _ = _object_part(node)
            for field, spec in body.get("properties", {}).items():
                for name, inside in _refs(spec):
                    if name in self.elsewhere or name == ROOT_NAMES[self.kind]:
                        continue
                    if name not in places:
                        pending.append(name)
                    where = f"`{field}{inside}`"
                    if parent != ROOT_NAMES[self.kind]:
                        where += f" of {self._link(parent)}"
                    if where not in places.setdefault(name, []):
                        places[name].append(where)
        return places

    def _part(self, name: str, schema: dict[str, Any], where: list[str]) -> str:
        title = _title(name, schema) if where else "Top level"
        lines = [f"## {title} {{#{_anchor(name)}}}", ""]
        if schema.get("description"):
            lines += [schema["description"], ""]
        if where:
            lines += [f"Where: {', '.join(where)}.", ""]
        body, shorthands = _object_part(schema)
        if shorthands:
            written = " or ".join(self._type(s) for s in shorthands)
            lines += [f"Written as {written} (short for the mapping), or as a mapping of:", ""]
        properties = body.get("properties", {})
        required = set(body.get("required", []))
        lines += ["| field | type | default | what it is |", "| --- | --- | --- | --- |"]
        for field, spec in properties.items():
            lines.append(
                f"| `{field}` | {self._type(spec, optional=field not in required)} "
                f"| {_default(spec, field in required)} | {_cell(self._description(spec))} |"
            )
        if body.get("additionalProperties") is False:
            lines += ["", "Any other field is refused."]
        return "\n".join(lines) + "\n"

    def _description(self, spec: dict[str, Any]) -> str:
        """A field's description; without one of its own, that of the one part it is."""
        if "description" in spec:
            return str(spec["description"])
        parts = {name for name, _ in _refs(spec)}
        if len(parts) == 1:
            return str(self.defs.get(parts.pop(), {}).get("description", ""))
        return ""

    def _type(self, spec: dict[str, Any], *, optional: bool = False) -> str:
        """What a value may be, in words (`integer ≥ 1`, `list of Step`), with links to the
        parts it names."""
        if "$ref" in spec:
            return self._link(spec["$ref"].rsplit("/", 1)[1])
        for key in ("anyOf", "oneOf"):
            if key in spec:
                choices = [c for c in spec[key] if not (optional and c == {"type": "null"})]
                return " or ".join(dict.fromkeys(self._type(c) for c in choices))
        if "enum" in spec:
            return " or ".join(_value(v) for v in spec["enum"])
        if "const" in spec:
            return _value(spec["const"])
        kind = spec.get("type")
        if kind == "array":
            items = spec.get("items")
            return f"list of {self._type(items)}" if items else "list"
        if kind == "object":
            values = spec.get("additionalProperties")
            if isinstance(values, dict):
                keys = spec.get("propertyNames", {})
                shown = self._type(values) if values else "any value"
                if "enum" in keys:
                    return f"mapping of {' or '.join(_value(k) for k in keys['enum'])} to {shown}"
                return f"mapping of {'name' if 'pattern' in keys else 'text'} to {shown}"
            return "mapping"
        return _scalar(spec)

    def _link(self, name: str) -> str:
        title = _title(name, self.defs.get(name, {}))
        page = self.elsewhere.get(name)
        if page is None:
            return f"[{title}](#{_anchor(name)})"
        return f"[{title}]({_relative(page, self.src_uri)}#{_anchor(name)})"


def _refs(spec: Any, inside: str = "") -> Iterator[tuple[str, str]]:
    """The parts a field's value may be, each with where it stands inside the value (`[]`
    for a list's items, `.NAME` for a mapping's values)."""
    if isinstance(spec, list):
        for value in spec:
            yield from _refs(value, inside)
    elif isinstance(spec, dict):
        if "$ref" in spec:
            yield spec["$ref"].rsplit("/", 1)[1], inside
        for key in ("anyOf", "oneOf"):
            yield from _refs(spec.get(key, []), inside)
        if isinstance(spec.get("items"), dict):
            yield from _refs(spec["items"], inside + "[]")
        if isinstance(spec.get("additionalProperties"), dict):
            yield from _refs(spec["additionalProperties"], inside + ".NAME")


def _object_part(schema: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """A part's mapping form, and the shorthands it may be written as instead."""
    if "properties" in schema:
        return schema, []
    choices = schema.get("anyOf", [])
    mappings = [c for c in choices if "properties" in c]
    if len(mappings) == 1:
        return mappings[0], [c for c in choices if c is not mappings[0]]
    return schema, []


def _title(name: str, schema: dict[str, Any]) -> str:
    body, _ = _object_part(schema)
    return str(body.get("title") or schema.get("title") or name)


def _anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _relative(page: str, src_uri: str) -> str:
    return posixpath.relpath(page, posixpath.dirname(src_uri))


def _scalar(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    words = {"string": "text", "integer": "integer", "number": "number", "boolean": "true/false"}
    if kind == "null":
        return "null"
    if not isinstance(kind, str):
        return "any value"
    shown = "path" if spec.get("format") == "path" else words.get(kind, kind)
    bounds = [
        f"{sign} {spec[key]}"
        for key, sign in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
        )
        if key in spec
    ]
    if spec.get("pattern"):
        bounds.append(f"matching `{spec['pattern']}`")
    return ", ".join([shown, *bounds])


def _default(spec: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in spec or spec["default"] is None:
        return ""
    return _value(spec["default"])


def _value(value: Any) -> str:
    """A value as YAML shows it: text bare, anything else as JSON (which YAML reads too)."""
    return f"`{value}`" if isinstance(value, str) else f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    """Text fit for a table cell: one line, its bars escaped."""
    return " ".join(text.split()).replace("|", "\\|")
