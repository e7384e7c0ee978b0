"""Reading what the package did not write: one bounded reader for JSON, one for YAML.

JSON: one parser for every JSON text read from a file a user gave, a line of a JSON Lines
file, or a reply. `json.loads` raises `RecursionError`, not a `ValueError`, on arrays or
objects nested about a thousand deep: unguarded, one such value ends a command in a
traceback. `load_json` turns it, as it does a syntax error, into a `JsonInputError` naming the
source and line. JSON Lines are split at `\\n` only (`json_lines`): `str.splitlines()` also
splits at U+2028, U+2029, U+0085, `\\x1c`-`\\x1e`, `\\v` and `\\f`, which
`json.dumps(..., ensure_ascii=False)` leaves unescaped inside strings, so it would cut a sound
line in two.

YAML: one loader for every YAML file the package reads. Job specs, model scripts, alias and
price files, SKILL.md frontmatter and `--model-option` values all come through here. The text
is composed into nodes first (by libyaml when PyYAML has it, which is several times faster on
a large file), and the node graph is measured before any Python value is made from it: YAML
aliases let a few lines stand for billions of values (the "billion laughs"), so a document
whose aliases add more than `MAX_ALIAS_EXPANSION` values, or that uses more than
`MAX_ALIASES` of them, or that refers to itself, is refused. The measure is memoised by node,
so it costs one pass over the nodes the text actually holds. A document nested more than
`MAX_YAML_DEPTH` deep is refused before it is composed, from the parser's events. A key given
twice in one mapping is refused too (`unique_keys=False` lets a caller that only warns about
it see every key, as the SKILL.md reader does). Every failure is a `YamlInputError` naming
the source and, when known, the line and column.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import yaml


class JsonInputError(ValueError):
    """JSON that cannot be read; `line` (from 1) is the line of a JSON Lines file."""

    def __init__(self, source: str, problem: str, *, line: int | None = None) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        where = f", line {line}" if line is not None else ""
        super().__init__(f"{source}{where}: {problem}")

    @property
    def detail(self) -> str:
        """The problem with its line, without the source's name."""
        return f"line {self.line}: {self.problem}" if self.line is not None else self.problem


def load_json(text: str | bytes, source: str, *, line: int | None = None) -> Any:
    """The Python value of a JSON text; a `JsonInputError` naming `source` (and `line`) when
    it is not JSON, not UTF-8, or nested too deeply for Python."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}"
        if line is None:
            where = f"line {exc.lineno}, {where}"
        raise JsonInputError(source, f"not JSON ({exc.msg}, {where})", line=line) from None
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start})"
        raise JsonInputError(source, problem, line=line) from None
    except RecursionError:
        raise JsonInputError(source, "the JSON is nested too deeply", line=line) from None


def json_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a JSON Lines text that hold something, numbered from 1, split at `\\n`
    only."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line


MAX_ALIAS_EXPANSION = 100_000
"""How many values aliases may add to a document beyond those its text writes out."""
MAX_ALIASES = 10_000
"""How many alias uses (`*name`) one document may hold."""
MAX_YAML_DEPTH = 1_000
"""How deep one document may nest (mappings and sequences). libyaml composes nodes by
recursing in C: some 20,000 levels (`[[[...`, 40 kB of text) overflow its stack and end the
process, and its scanner slows down with the square of the depth on the way."""

_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PlainBase: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


class YamlInputError(ValueError):
    """YAML that cannot be read, or that is refused; `line` and `column` count from 1."""

    def __init__(
        self,
        source: str,
        problem: str,
        *,
        line: int | None = None,
        column: int | None = None,
        context: str | None = None,
        context_line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        self.column = column
        self.context = context
        self.context_line = context_line
        self.hint = hint
        super().__init__(f"{source}: {self.detail}")

    @property
    def where(self) -> str:
        """`line 3, column 1: `, or nothing when the place is unknown."""
        if self.line is None:
            return ""
        return f"line {self.line}, column {self.column}: " if self.column else f"line {self.line}: "

    @property
    def detail(self) -> str:
        """The problem with its place, without the source's name."""
        text = f"{self.where}{self.problem}"
        if self.context and self.context_line is not None:
            text += f" ({self.context} on line {self.context_line})"
        if self.hint:
            text += f"; {self.hint}"
        return text


class YamlTooLarge(YamlInputError):
    """YAML refused for what it would expand to (aliases), not for its syntax."""


class _SafeLoader(_SafeBase):  # type: ignore[misc]  # the base is chosen at run time (libyaml when built)
    """The safe loader (tags resolved: numbers, booleans, null), refusing duplicate keys."""


class _StringLoader(_PlainBase):  # type: ignore[misc]
    """Composes nodes without resolving tags: every scalar stays the string it was."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        return ""  # tags are never used, so resolving them is skipped


def _unique_keys_mapping(loader: Any, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key_node.value!r} is given twice", key_node.start_mark
                )
            seen.add(key_node.value)
    return loader.construct_mapping(node)  # type: ignore[no-any-return]


_SafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_keys_mapping)


def load_yaml(text: str, source: str, *, unique_keys: bool = True) -> Any:
    """The Python value of one YAML document (None for an empty one), read safely."""
    loader = _SafeLoader(text)
    try:
        node = _compose(loader, source, text)
        if node is None:
            return None
        if not unique_keys:
            loader.yaml_constructors = {
                **loader.yaml_constructors,
                yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG: type(loader).construct_yaml_map,
            }
        return _construct(loader, node, source, text)
    finally:
        loader.dispose()


def compose_yaml(text: str, source: str) -> yaml.Node | None:
    """The measured node graph of one YAML document with every scalar left a string (tags
    are not resolved), for a reader that turns nodes into values itself."""
    loader = _StringLoader(text)
    try:
        return _compose(loader, source, text)
    finally:
        loader.dispose()


def _compose(loader: Any, source: str, text: str) -> yaml.Node | None:
    _check_depth(source, text)
    with _errors_named(source, text):
        node: yaml.Node | None = loader.get_single_node()
    if node is not None:
        _check_expansion(node, source)
    return node


def _check_depth(source: str, text: str) -> None:
    """Refuse a document nested deeper than `MAX_YAML_DEPTH`, from the parser's events (which
    libyaml makes without recursing), stopping where it goes past. Each level takes a
    character of text at least, so a shorter text is not read twice."""
    if len(text) <= MAX_YAML_DEPTH:
        return
    events = _PlainBase(text)
    depth = 0
    try:
        with _errors_named(source, text), _own_depth_refusal(source):
            while events.check_event():
                event = events.get_event()
                if isinstance(event, yaml.CollectionStartEvent):
                    depth += 1
                    if depth > MAX_YAML_DEPTH:
                        mark = event.start_mark
                        raise YamlTooLarge(
                            source,
                            f"refused: it is nested more than {MAX_YAML_DEPTH} deep",
                            line=mark.line + 1 if mark else None,
                            column=mark.column + 1 if mark else None,
                        )
                elif isinstance(event, yaml.CollectionEndEvent):
                    depth -= 1
    finally:
        events.dispose()


@contextlib.contextmanager
def _own_depth_refusal(source: str) -> Iterator[None]:
    """PyYAML 6.0.4 and later refuse deep nesting themselves, at about the same bound, and
    may find it before the events reach ours: the refusal is said in our words either way."""
    try:
        yield
    except yaml.MarkedYAMLError as error:
        if "maximum nesting depth" not in (error.problem or ""):
            raise
        mark = error.problem_mark
        raise YamlTooLarge(
            source,
            f"refused: it is nested more than {MAX_YAML_DEPTH} deep",
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None


def _construct(loader: Any, node: yaml.Node, source: str, text: str) -> Any:
    with _errors_named(source, text):
        return loader.construct_document(node)


@contextlib.contextmanager
def _errors_named(source: str, text: str) -> Iterator[None]:
    """PyYAML's errors (and a nesting too deep for Python) as ours, naming the file."""
    try:
        yield
    except yaml.MarkedYAMLError as error:
        raise _marked(error, source, text) from None
    except yaml.YAMLError as error:
        raise YamlInputError(source, f"invalid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise YamlTooLarge(source, "the YAML is nested too deeply") from None


def _marked(error: yaml.MarkedYAMLError, source: str, text: str) -> YamlInputError:
    mark = error.problem_mark or error.context_mark
    context_mark = error.context_mark if error.problem else None
    line = mark.line + 1 if mark else None
    context_line = context_mark.line + 1 if context_mark else None
    problem = error.problem or error.context or ""
    context = error.context or ""
    column = mark.column if mark else None
    hint, line_at_fault = _hint(problem, context, text.splitlines(), line, context_line, column)
    return YamlInputError(
        source,
        f"invalid YAML: {problem}",
        line=line_at_fault or line,
        column=mark.column + 1 if mark and not line_at_fault else None,
        context=error.context if error.problem else None,
        context_line=context_line,
        hint=hint,
    )


def _hint(
    problem: str,
    context: str,
    lines: list[str],
    line: int | None,
    context_line: int | None,
    column: int | None = None,
) -> tuple[str | None, int | None]:
    """PyYAML's message for the usual slips in words, and the line really at fault when it
    is not the one PyYAML names (None: PyYAML's line is right). `column` is PyYAML's, from 0."""

    def shown(number: int | None) -> str:
        if number is None or not 0 < number <= len(lines):
            return ""
        return f" ({lines[number - 1].strip()[:60]})"

    if "tab character" in problem or "'\\t'" in problem:
        return f"line {line}{shown(line)} is indented with a tab; YAML indents with spaces", None
    if "could not find expected ':'" in problem and context_line is not None:
        return (
            f"line {context_line}{shown(context_line)} has no ':' after its key; a likely "
            "missing colon (write key: value)",
            context_line,
        )
    if "mapping values are not allowed" in problem and _over_indented_key(lines, line, column):
        return (
            f"line {line}{shown(line)} is indented more than the line above it; a likely "
            "indentation slip (if it goes on with the value above, put that value in quotes)",
            None,
        )
    if "mapping values are not allowed" in problem:
        return (
            f"line {line}{shown(line)} holds a second ': ' inside a value; put the value in quotes",
            None,
        )
    if "end of stream" in problem and "quoted scalar" in context and context_line is not None:
        return f"the quote opened on line {context_line} is never closed", context_line
    if _closed_quote_before(lines, line, column):
        return (
            f"line {line}{shown(line)} ends its quoted value at the quote before column "
            f"{(column or 0) + 1}, and more text follows; inside double quotes write a quote as "
            "\\\", inside single quotes as '', or leave the value unquoted",
            None,
        )
    if any(
        slip in problem
        for slip in ("expected '-' indicator", "expected <block end>", "did not find expected key")
    ):
        return (
            f"line {line}{shown(line)} is indented differently from the lines above it; a "
            "likely indentation slip",
            None,
        )
    return None, None


def _closed_quote_before(lines: list[str], line: int | None, column: int | None) -> bool:
    """Whether PyYAML stopped right after the closing quote of a quoted value, with more of
    the line to come: a quote inside a value that was not escaped (`"Use "this" one"`)."""
    if line is None or column is None or not 0 < line <= len(lines):
        return False
    text = lines[line - 1]
    value = re.match(r"\s*(?:-\s+)?[^\s:\"'][^:]*:\s+([\"'])", text)
    if value is None or not 0 < column < len(text.rstrip()):
        return False
    return column > value.end() and text[column - 1] == value.group(1)


def _over_indented_key(lines: list[str], line: int | None, column: int | None) -> bool:
    """Whether the ': ' PyYAML refused is the first of its line, and that line is indented
    more than the line above it: a key pushed right, which YAML reads as going on with the
    value above (a second ': ' in a value is further right on its line)."""
    if line is None or column is None or not 1 < line <= len(lines):
        return False
    text = lines[line - 1]
    above = next((t for t in reversed(lines[: line - 1]) if t.strip()), None)
    first = text.find(":")
    if above is None or first != column:
        return False
    return len(text) - len(text.lstrip(" ")) > len(above) - len(above.lstrip(" "))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse a graph whose aliases expand it too far, or that contains itself.

    A node met again is an alias: the graph is walked once (iteratively, so depth costs no
    Python stack), each node's expanded size memoised by its id.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    aliases = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _refused(source, node, f"more than {MAX_ALIASES:,} aliases")
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise _refused(source, child, "an alias refers to a value that contains it")
            stack.append((child, False))
    written = len(sizes)
    added = sizes[id(root)] - written
    if added > MAX_ALIAS_EXPANSION:
        raise _refused(
            source,
            root,
            f"its aliases expand it by {added:,} values (at most {MAX_ALIAS_EXPANSION:,} are "
            "allowed)",
        )


def _refused(source: str, node: yaml.Node, why: str) -> YamlTooLarge:
    mark = node.start_mark
    return YamlTooLarge(
        source,
        f"refused: {why}",
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
    )
