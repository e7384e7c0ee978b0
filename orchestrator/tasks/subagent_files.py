"""Reading sub-agent definition files: ours, Claude Code's and OpenAI Codex's, unchanged.

- **Ours** (`*.md`): frontmatter `name`, `description`, `skills` (the skills it may use, or
  `"*"`), `model`, `max_steps`, `max_tokens`, `output_schema`, `output_mode`,
  `output_retries` (docs/typed-outputs.md), `compaction` and `note`
  (docs/context-window.md); the body is the system prompt. With `a2a:
  URL` (and optionally `token_env`, `skill`, `time_limit`, `max_calls`), the agent is a remote
  A2A agent (`RemoteAgent`) and the body is not used.
- **Claude Code's** (`*.md`, e.g. `.claude/agents/code-reviewer.md`): recognised by a field
  only Claude Code uses (`tools`, `maxTurns`, `color`, ...) or by its folder. `tools` (a
  comma list or a YAML list) maps to our skills (`Read`/`Grep`/`Glob`/`LS`/`Write`/`Edit`/
  `MultiEdit` -> files, `Bash` -> shell, `WebFetch` -> http; others warn) and limits the agent
  to those tools; `disallowedTools` denies; `skills` are preloaded; `maxTurns` is `max_steps`;
  `model: inherit` is the parent's model, other values stay as written; `color` and every
  other field are kept as metadata. The name need not be the file's.
- **Codex's** (`*.toml`, e.g. `.codex/agents/reviewer.toml`): `name`, `description`,
  `developer_instructions` (the system prompt), `model`; the rest is kept as metadata.

Reading is lenient: a name that breaks the rules becomes one that keeps them (warned about),
a missing description is the body's first paragraph. A file that cannot be read at all raises
`DefinitionError`.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from ..security.inventory import reads
from ..skills.allowed import resolve_tools, tool_tokens
from ..skills.skill_md import (
    FrontmatterError,
    first_paragraph,
    parse_forgiving,
    slug,
    split_skill_text,
)

NAME = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
OUR_FIELDS = (
    "name",
    "description",
    "skills",
    "model",
    "max_steps",
    "max_tokens",
    "output_schema",
    "output_mode",
    "output_retries",
    "compaction",
    "note",
    "questions",
)
REMOTE_FIELDS = ("a2a", "token_env", "skill", "time_limit", "max_calls")
"""A remote (A2A) agent's fields: `a2a` is its URL, the others `RemoteAgent`'s."""
CLAUDE_ONLY = (
    "tools",
    "disallowedTools",
    "maxTurns",
    "permissionMode",
    "color",
    "hooks",
    "mcpServers",
    "memory",
    "background",
    "effort",
    "isolation",
    "initialPrompt",
)
CLAUDE_MAPPED = ("tools", "disallowedTools", "maxTurns")
NO_EFFECT = "has no effect"
"""In the note for a field that is dropped: the registry warns about those (SafetyWarning)."""
SAFETY_FIELDS = (
    "permissions",
    "permissionMode",
    "hooks",
    "mcpServers",
    "isolation",
    "sandbox_mode",
    "allowed-tools",
    "allowed_tools",
)
"""Fields of ours, Claude Code's and Codex's dialects about what an agent may do, which a
sub-agent here does not have: its agent gets its parent's permissions, narrowed by skills."""
"""Claude Code's fields that become fields of ours; its others are kept as metadata."""
CODEX_FIELDS = ("name", "description", "developer_instructions", "model")
_NO_SKILL_NEEDED = frozenset({"fork"})


class DefinitionError(Exception):
    """A definition file that cannot be understood; the message says why."""


@reads("sub-agent definition")
def read_definition(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The fields of a `SubagentDef` read from `path`, and warnings about what was made up for."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(f"cannot be read ({exc})") from None
    if path.suffix.lower() == ".toml":
        return _codex(text, path)
    return _markdown(text, path)


def dialect_of(meta: dict[str, Any], path: Path) -> str:
    """`claude` for a Claude Code file, else `orchestrator`."""
    in_claude = path.parent.name == "agents" and path.parent.parent.name == ".claude"
    return "claude" if in_claude or any(key in meta for key in CLAUDE_ONLY) else "orchestrator"


def _markdown(text: str, path: Path) -> tuple[dict[str, Any], list[str]]:
    try:
        frontmatter, body, _ = split_skill_text(text)
        if frontmatter is None:
            raise DefinitionError("no YAML frontmatter (the file must start with a '---' line)")
        known = (*OUR_FIELDS, *REMOTE_FIELDS, *CLAUDE_ONLY, "skills")
        meta, problems = parse_forgiving(frontmatter, known)
    except FrontmatterError as exc:
        raise DefinitionError(_reason(exc)) from None
    notes = [p.message for p in problems if p.rule != "yaml-duplicate-key"]
    for reserved in ("system", "path"):
        if reserved in meta:
            raise DefinitionError(f"unknown field {reserved!r}")
    copied = (
        "max_steps",
        "max_tokens",
        "output_schema",
        "output_mode",
        "output_retries",
        "compaction",
        "note",
        "questions",
    )
    fields: dict[str, Any] = {k: meta[k] for k in copied if k in meta}
    fields["system"] = body
    fields.update(_identity(meta, body, path, notes))
    if meta.get("model") is not None:
        fields["model"] = _model(meta["model"])
    fields["format"] = dialect_of(meta, path)
    if fields["format"] == "claude":
        fields.update(_claude(meta, notes))
    else:
        fields["skills"] = _skill_names(meta["skills"]) if "skills" in meta else "*"
    if meta.get("a2a") is not None:
        fields["remote"] = remote_fields(meta)
    used = (*OUR_FIELDS, *CLAUDE_MAPPED, *REMOTE_FIELDS)
    unused = {k: v for k, v in meta.items() if k not in used}
    notes.extend(_dropped(unused))
    fields["metadata"] = _metadata(unused)
    return fields, notes


def remote_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """`RemoteAgent`'s fields from a definition's (or a spec entry's): `a2a` is the URL."""
    remote = {k: meta[k] for k in REMOTE_FIELDS[1:] if meta.get(k) is not None}
    return {"url": str(meta["a2a"]).strip(), **remote}


def _dropped(unused: dict[str, Any]) -> list[str]:
    """Notes for the fields a definition asks for that would limit or extend what its agent
    may do, and that do nothing here (other unknown fields are kept as metadata quietly, and
    `subagents check` reports them)."""
    names = [k for k in unused if k in SAFETY_FIELDS]
    return [
        f"{name}: not a field of a sub-agent here, so it {NO_EFFECT} (its agent gets its "
        "parent's permissions, narrowed only by `skills`)"
        for name in names
    ]


def _reason(exc: FrontmatterError) -> str:
    message = exc.problem.message
    if exc.problem.rule == "yaml" and "mapping" in message:
        return "frontmatter must be a mapping of fields"
    if exc.problem.rule == "yaml":
        return f"frontmatter is not valid YAML ({message})"
    return message


def _identity(meta: dict[str, Any], body: str, path: Path, notes: list[str]) -> dict[str, str]:
    """The name and description, with their fallbacks."""
    raw = meta.get("name")
    name = raw.strip() if isinstance(raw, str) else ""
    if not NAME.match(name) or len(name) > 64:
        fixed = slug(name) or slug(path.stem)
        if not fixed:
            raise DefinitionError(f"name {raw!r}: no usable name, nor in the file name")
        what = f"name {raw!r} breaks the naming rules" if name else "no name"
        notes.append(f"{what}; loaded as {fixed!r}")
        name = fixed
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        description = first_paragraph(body)
        if description is None:
            raise DefinitionError("description: Field required (and the body has no paragraph)")
        notes.append("no description; the body's first paragraph is used")
    return {"name": name, "description": " ".join(description.split())}


def _model(value: Any) -> Any:
    """`inherit` (and nothing) is the parent's model; a settings mapping is kept for the
    definition to check; any other value stays as written."""
    if isinstance(value, dict):
        return value
    text = str(value).strip()
    return None if text in ("", "inherit") else text


def _claude(meta: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The Claude Code fields: tools as skills and a limit, preloaded skills, max turns."""
    listed = _skill_names(meta.get("skills")) if "skills" in meta else []
    listed = [] if listed == "*" else listed
    fields: dict[str, Any] = {"preload": list(listed)}
    if "maxTurns" in meta:
        fields["max_steps"] = meta["maxTurns"]
    if "disallowedTools" in meta:
        fields["disallowed_tools"] = tool_tokens(meta["disallowedTools"])
    if "tools" not in meta:
        fields["skills"] = "*"
        return fields
    tokens = tool_tokens(meta["tools"])
    names, whole, foreign = resolve_tools(tokens)
    notes.extend(f"tool {t!r} has no equivalent here; ignored" for t in foreign)
    reached = sorted({n.partition("__")[0] for n in names if n not in _NO_SKILL_NEEDED} | whole)
    fields["tools"] = [*tokens, *listed]  # the skills it lists may use their own tools
    fields["skills"] = list(dict.fromkeys([*reached, *listed]))
    fields["preload"] = list(dict.fromkeys([*reached, *listed]))
    return fields


def _skill_names(value: Any) -> list[str] | str:
    if value == "*":
        return "*"
    if isinstance(value, list):
        return [str(item).strip() for item in value if str(item).strip()]
    return [word for word in re.split(r"[\s,]+", str(value or "")) if word]


def _metadata(extra: dict[str, Any]) -> dict[str, str]:
    return {
        str(key): value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for key, value in extra.items()
    }


def _codex(text: str, path: Path) -> tuple[dict[str, Any], list[str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DefinitionError(f"not valid TOML ({exc})") from None
    instructions = data.get("developer_instructions")
    body = instructions.strip() if isinstance(instructions, str) else ""
    notes: list[str] = []
    fields: dict[str, Any] = {"system": body, "skills": "*", "format": "codex"}
    meta = {k: v for k, v in data.items() if k in ("name", "description")}
    fields.update(_identity(meta, body, path, notes))
    if data.get("model") is not None:
        fields["model"] = _model(data["model"])
    unused = {k: v for k, v in data.items() if k not in CODEX_FIELDS}
    notes.extend(_dropped(unused))
    fields["metadata"] = _metadata(unused)
    return fields, notes
