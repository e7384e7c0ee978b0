"""Model aliases: short names users type (`sonnet`) for a model and its settings.

Three tables, each over the one before: the built-in aliases, the user's own file
(`$XDG_CONFIG_HOME/orchestrator/models.yaml`, else `~/.config/orchestrator/models.yaml`), and
a job spec's `models:` section. Each maps a name to a model string or a settings mapping:

    cheap: {name: openai-compatible:qwen3, base_url: http://127.0.0.1:8080/v1, stream: false}
    strong: opus
    default: sonnet          # the model of `orchestrator ask` when --model is not given

A reference may add options of its own (`{name: cheap, temperature: 0}`): they go over the
alias's. An alias may name another alias; a cycle is an error.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from ..errors import ConfigError
from ..security.inventory import user_config_folder
from ..security.yaml_input import YamlInputError, load_yaml
from .settings import ModelSettings

BUILTIN_ALIASES: dict[str, str] = {
    # Anthropic's current models; update this table (and docs/models.md) when they change.
    "sonnet": "anthropic:claude-sonnet-4-6",
    "opus": "anthropic:claude-opus-4-6",
    "haiku": "anthropic:claude-haiku-4-5",
}
INHERIT = "inherit"
"""In a sub-agent definition: use the model of the agent that forked it (the default)."""
DEFAULT_ALIAS = "default"
ALIAS_FILE = "models.yaml"

ModelRef = str | ModelSettings


def user_alias_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where the user's alias table lives (it need not exist)."""
    return user_config_folder(environ) / ALIAS_FILE


def read_alias_file(path: Path) -> dict[str, ModelSettings]:
    """The aliases in a YAML file; none when it does not exist; ConfigError when it is wrong."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    except YamlInputError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc.detail})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of alias names to models")
    return parse_aliases(data, source=str(path))


def parse_aliases(table: Mapping[str, object], source: str = "aliases") -> dict[str, ModelSettings]:
    """`{name: "provider:model" or {name: ..., options}}` as settings; ConfigError naming a
    bad entry."""
    aliases: dict[str, ModelSettings] = {}
    for name, value in table.items():
        if not isinstance(name, str) or ":" in name or not name.strip():
            raise ConfigError(f"{source}: {name!r}: an alias name is a word without ':'")
        try:
            aliases[name] = ModelSettings.model_validate(value)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in (name, *first["loc"]))
            raise ConfigError(f"{source}: {where}: {first['msg']}") from None
    return aliases


class ModelAliases:
    """Alias tables layered in order, later ones over earlier ones."""

    def __init__(self, *tables: Mapping[str, ModelRef]) -> None:
        self.table: dict[str, ModelSettings] = {}
        for table in tables:
            self.table.update({k: ModelSettings.model_validate(v) for k, v in table.items()})

    @classmethod
    def standard(
        cls, *extra: Mapping[str, ModelRef], environ: Mapping[str, str] | None = None
    ) -> ModelAliases:
        """The built-in aliases, then the user's file, then `extra` (a spec's `models:`)."""
        return cls(BUILTIN_ALIASES, read_alias_file(user_alias_file(environ)), *extra)

    @property
    def names(self) -> list[str]:
        return sorted(self.table)

    def __contains__(self, name: object) -> bool:
        return name in self.table

    def expand(self, model: ModelRef) -> ModelSettings:
        """The model an alias stands for, with the reference's own options on top; a
        `provider:model` name is returned as it is."""
        settings = ModelSettings.model_validate(model)
        seen: list[str] = []
        while settings.is_alias:
            name = settings.name
            if name in seen:
                raise ConfigError(f"model alias cycle: {' -> '.join([*seen, name])}")
            seen.append(name)
            target = self.table.get(name)
            if target is None:
                raise ConfigError(self.unknown(name))
            try:
                settings = settings.over(target)
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ConfigError(f"{where}: {first['msg']} (alias {name!r})") from None
        return settings

    def unknown(self, name: str) -> str:
        """Why `name` is not a model, with the close matches."""
        if name == INHERIT:
            return "'inherit' (the parent's model) is only meaningful in a sub-agent definition"
        close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        return (
            f"unknown model {name!r}{hint}: give 'provider:model' (e.g. 'openai:gpt-4o-mini') "
            f"or an alias; aliases: {', '.join(self.names) or 'none'}"
        )
