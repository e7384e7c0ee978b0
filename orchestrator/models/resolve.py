"""From a model reference to a model: aliases, the providers, and `resolve_model`.

A reference is a model string (`provider:model`), `ModelSettings`, or an alias: a short name
users type (`sonnet`) for a model and its settings. Three alias tables, each over the one
before: the built-in aliases, the user's own file (`$XDG_CONFIG_HOME/orchestrator/models.yaml`,
else `~/.config/orchestrator/models.yaml`), and a job spec's `models:` section. Each maps a
name to a model string or a settings mapping:

    cheap: {name: openai-compatible:qwen3, base_url: http://127.0.0.1:8080/v1, stream: false}
    strong: opus
    default: sonnet          # the model of `orchestrator ask` when --model is not given

A reference may add options of its own (`{name: cheap, temperature: 0}`): they go over the
alias's. An alias may name another alias; a cycle is an error.

`check_model` and `resolve_model` take one path (`_find`): expand the alias, check the
`provider:model` shape, find the provider's factory. Checking stops there; resolving builds
the model. A preset's model (settings.py: `PRESETS`) is built by `build_model`, which imports
the HTTP adapters and httpx only then: resolving a scripted or replayed model never loads them.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from ..security.inputs import YamlInputError, load_yaml
from ..security.inventory import reads, user_config_folder
from .base import DEFAULT_OUTPUT_MODES, ChatModel, OutputMode, priced_by, unwrap
from .prices import DEFAULT_PRICES, PriceTable
from .scripted import SCRIPTED_OUTPUT_MODES, ScriptedModel
from .settings import (
    PRESETS,
    AnthropicOptions,
    ConnectionSettings,
    MissingSettingError,
    ModelSettings,
    OpenAIOptions,
    Preset,
)

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
ModelFactory = Callable[..., ChatModel]
M = TypeVar("M", bound=BaseModel)


def user_alias_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where the user's alias table lives (it need not exist)."""
    return user_config_folder(environ) / ALIAS_FILE


@reads("user configuration")
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
        meant = _spelled_as_a_model(name)
        close = [meant] if meant else difflib.get_close_matches(name, self.names, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        return (
            f"unknown model {name!r}{hint}: give 'provider:model' (e.g. 'openai:gpt-4o-mini') "
            f"or an alias; aliases: {', '.join(self.names) or 'none'}"
        )


# Model names whose provider is plain from their first letters.
MODEL_FAMILIES = {
    "gpt-": "openai",
    "o1": "openai",
    "o3": "openai",
    "o4": "openai",
    "claude-": "anthropic",
    "deepseek-": "deepseek",
}


def _spelled_as_a_model(name: str) -> str | None:
    """`provider:model` for a name that is one written another way: `openai/gpt-4o-mini`
    (the slash other tools use), or `gpt-4o-mini` without its provider."""
    provider, slash, rest = name.partition("/")
    if slash and rest and provider in PROVIDERS:
        return f"{provider}:{rest}"
    if ":" in name or "/" in name:
        return None
    known = next((m for m in DEFAULT_PRICES if m.partition(":")[2] == name), None)
    if known is not None:
        return known
    family = next((p for prefix, p in MODEL_FAMILIES.items() if name.startswith(prefix)), None)
    return f"{family}:{name}" if family else None


def _scripted(target: str, **options: Any) -> ChatModel:
    return ScriptedModel(target, **options)


def _replay(target: str, **options: Any) -> ChatModel:
    from .replay import ReplayModel  # a recording's reader, loaded only to replay one

    return ReplayModel(target, **options)


class PresetFactory:
    """The `resolve_model` factory of one preset; it also takes the environment to read."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def __call__(
        self, target: str, *, environ: Mapping[str, str] | None = None, **options: Any
    ) -> ChatModel:
        return build_model(self.provider, target, options, environ)

    def __repr__(self) -> str:
        return f"PresetFactory({self.provider!r})"


PROVIDERS: dict[str, ModelFactory] = {
    "scripted": _scripted,
    "replay": _replay,
    **{name: PresetFactory(name) for name in PRESETS},
}


def resolve_model(
    model: ModelRef | ChatModel,
    *,
    aliases: ModelAliases | None = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> ChatModel:
    """Turn `provider:model`, an alias or `ModelSettings` into a model; a ChatModel passes
    through unchanged.

    `scripted:PATH` replays the script at PATH; `replay:TRACE` answers with the responses
    recorded in a trace (models/replay.py). `openai:`, `anthropic:`, `deepseek:`,
    `ollama:` and `openai-compatible:` reach real servers (see docs/models.md); `options`
    are their connection settings (`base_url`, `api_key`, `timeout`, `max_retries`, ...) and
    wire options (`stream`, `extra_body`, ...), over those of the settings. A name without a
    `:` is an alias (`sonnet`; see `ModelAliases`, by default the built-in ones and the
    user's file). Base URLs and keys not given come from `environ` (default: the process
    environment), as does the key that settings name with `api_key_env`.
    """
    if not isinstance(model, str | ModelSettings):
        return model
    settings, factory = _find(model, aliases, environ)
    key = settings.key_from(os.environ if environ is None else environ)
    given = {**settings.options(), **({"api_key": key} if key else {}), **options}
    target = settings.name.partition(":")[2]
    if isinstance(factory, PresetFactory):
        return factory(target, environ=environ, **given)
    return factory(target, **given)


def check_model(model: ModelRef, aliases: ModelAliases | None = None) -> ModelSettings:
    """The settings `model` stands for, or the ConfigError that resolving it would raise for
    its name alone (an unknown alias or provider, a name without `provider:`); nothing is
    built and no key is needed."""
    return _find(model, aliases, None)[0]


def _find(
    model: ModelRef, aliases: ModelAliases | None, environ: Mapping[str, str] | None
) -> tuple[ModelSettings, ModelFactory]:
    """The settings a reference stands for (an alias expanded) and its provider's factory."""
    settings = ModelSettings.model_validate(model)
    if settings.is_alias:
        settings = (aliases or ModelAliases.standard(environ=environ)).expand(settings)
    provider, _, target = settings.name.partition(":")
    if not target:
        raise ConfigError(
            f"model {settings.name!r} must look like 'provider:model'; "
            f"providers: {', '.join(PROVIDERS)}"
        )
    factory = PROVIDERS.get(provider)
    if factory is None:
        raise ConfigError(unknown_provider(provider))
    return settings, factory


def output_modes_for(settings: ModelSettings) -> tuple[OutputMode, ...]:
    """How the model of `settings` (an alias expanded: `check_model`) can be asked for a
    structured answer, its default first: its built model's `output_modes`, known without
    building it (no key needed)."""
    if settings.provider == "scripted":
        return SCRIPTED_OUTPUT_MODES
    preset = PRESETS.get(settings.provider or "")
    return preset.output_modes if preset is not None else DEFAULT_OUTPUT_MODES


def unknown_provider(provider: str) -> str:
    close = difflib.get_close_matches(provider, PROVIDERS, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown model provider {provider!r}{hint}; known: {', '.join(PROVIDERS)}"


def build_model(
    provider: str,
    model: str,
    options: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> ChatModel:
    """A ready model for `provider:model`; `options` mixes wire options and connection settings.

    Base URLs and keys not given come from `environ` (the process environment by default).
    """
    # The adapters, and httpx under them, are loaded here, when a provider first needs them.
    from .anthropic import AnthropicModel
    from .http import Connection
    from .openai import OpenAIChatModel

    preset = PRESETS[provider]
    wire_fields = (OpenAIOptions if preset.wire == "openai" else AnthropicOptions).model_fields
    wire = {k: v for k, v in options.items() if k in wire_fields}
    rest = {k: v for k, v in options.items() if k not in wire}
    settings = _settings(provider, preset, rest, os.environ if environ is None else environ)
    if preset.wire == "anthropic":
        connection = Connection(provider, settings, auth="x-api-key")
        return AnthropicModel(model, connection, _validated(provider, AnthropicOptions, wire))
    wire.setdefault("max_tokens_field", preset.max_tokens_field)
    chat_options = _validated(provider, OpenAIOptions, wire)
    return OpenAIChatModel(model, Connection(provider, settings), chat_options)


def _settings(
    provider: str, preset: Preset, options: dict[str, Any], environ: Mapping[str, str]
) -> ConnectionSettings:
    base_url = options.pop("base_url", None)
    base_url_from_env = False
    if base_url is None and environ.get(preset.base_url_env):
        base_url, base_url_from_env = environ[preset.base_url_env], True
    base_url = base_url or preset.base_url
    if not base_url:
        raise MissingSettingError(provider, "base URL", preset.base_url_env, option="base_url")
    api_key = options.pop("api_key", None)
    if api_key is None and preset.key_env and (preset.key_required or base_url_from_env):
        api_key = environ.get(preset.key_env) or None
    if api_key is None and preset.key_required:
        raise MissingSettingError(provider, "API key", preset.key_env, option="api_key")
    if api_key is not None and not isinstance(api_key, str):
        raise ConfigError(f"{provider}: api_key must be a string")
    values = {"base_url": base_url, "api_key": api_key, **options}
    return _validated(provider, ConnectionSettings, values)


def _validated(provider: str, model_type: type[M], values: Mapping[str, Any]) -> M:
    try:
        return model_type.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'options'}: "
            + ("unknown option" if error["type"] == "extra_forbidden" else error["msg"])
            for error in exc.errors(include_url=False)
        )
        raise ConfigError(f"{provider}: invalid model options: {problems}") from None


class ResolvedModels:
    """The models of one run, one per distinct reference: the same settings give the same
    model, so its state is shared (a scripted model's turns, a price set on it).

    `prepare` is applied once to each model built (a run prices its models with it).
    """

    def __init__(
        self,
        *,
        aliases: ModelAliases | None = None,
        environ: Mapping[str, str] | None = None,
        prepare: Callable[[ChatModel], ChatModel] | None = None,
    ) -> None:
        self.aliases = aliases
        self.environ = environ
        self.prepare = prepare
        self._models: dict[str, ChatModel] = {}

    @classmethod
    def priced(
        cls,
        prices: PriceTable,
        *,
        aliases: ModelAliases,
        environ: Mapping[str, str],
        capped: bool,
    ) -> ResolvedModels:
        """A run's models: each priced from `prices` as it is built; under a money cap
        (`capped`) a model with no price is refused (`unpriced`)."""
        return cls(aliases=aliases, environ=environ, prepare=priced_by(prices, required=capped))

    def get(self, model: ModelRef | ChatModel) -> ChatModel:
        """The model for `model`, resolved on first use; a ChatModel passes through."""
        if not isinstance(model, str | ModelSettings):
            return model
        key = ModelSettings.model_validate(model).model_dump_json()
        if key not in self._models:
            built = resolve_model(model, aliases=self.aliases, environ=self.environ)
            self._models[key] = self.prepare(built) if self.prepare else built
        return self._models[key]

    def key_of(self, model: ChatModel | None) -> str | None:
        """The settings (JSON) `model` was resolved from; None for one resolved elsewhere."""
        inner = unwrap(model) if model is not None else None
        return next((key for key, known in self._models.items() if unwrap(known) is inner), None)

    def settings(self) -> list[ModelSettings]:
        """The settings of every model resolved so far."""
        return [ModelSettings.model_validate_json(key) for key in self._models]
