"""Model settings, aliases, and resolving them with an environment of the caller's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.errors import ConfigError
from orchestrator.models import (
    BUILTIN_ALIASES,
    AnthropicModel,
    MissingSettingError,
    ModelAliases,
    ModelSettings,
    OpenAIChatModel,
    resolve_model,
)
from orchestrator.tasks.subagents import parse_subagent

LOCAL = "http://127.0.0.1:8080/v1"


def errors_of(data: object) -> list[tuple[tuple[object, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        ModelSettings.model_validate(data)
    return [(e["loc"], e["msg"]) for e in caught.value.errors()]


def test_a_string_is_a_name_and_a_mapping_gives_options() -> None:
    assert ModelSettings.model_validate("openai:gpt-4o-mini").options() == {}
    settings = ModelSettings.model_validate(
        {"name": "openai-compatible:qwen3", "base_url": LOCAL + "/", "stream": "false"}
    )
    assert settings.options() == {"base_url": LOCAL, "stream": False}
    model = resolve_model(settings, environ={})
    assert isinstance(model, OpenAIChatModel)
    assert (model.connection.base_url, model.options.stream) == (LOCAL, False)


def test_a_key_is_refused_and_the_error_names_api_key_env() -> None:
    ((loc, message),) = errors_of({"name": "openai:gpt-4o", "api_key": "sk-secret-0123456789"})
    assert loc == ("api_key",)
    assert "api_key_env: MY_KEY" in message and "sk-secret" not in message


def test_bad_options_name_their_field() -> None:
    assert errors_of({"name": "openai:x", "timeout": 0})[0][0] == ("timeout",)
    assert errors_of({"name": "openai:x", "stremm": True})[0][0] == ("stremm",)
    assert "http://" in errors_of({"name": "openai:x", "base_url": "ftp://x"})[0][1]
    ((loc, message),) = errors_of({"name": "anthropic:claude", "include_usage": False})
    assert loc == ("include_usage",) and "Messages API" in message
    assert (
        "takes only context_window" in errors_of({"name": "scripted:s.yaml", "stream": False})[0][1]
    )


def test_the_key_comes_from_the_variable_api_key_env_names() -> None:
    settings = ModelSettings.model_validate(
        {"name": "openai-compatible:x", "base_url": LOCAL, "api_key_env": "LOCAL_KEY"}
    )
    model = resolve_model(settings, environ={"LOCAL_KEY": "local-key-123456"})
    assert model.connection._key == "local-key-123456"
    with pytest.raises(MissingSettingError) as caught:
        resolve_model(settings, environ={})
    assert "LOCAL_KEY" in str(caught.value)
    assert caught.value.for_files().endswith(
        "set LOCAL_KEY in the environment or in a .env file beside the job spec or in this folder"
    )


def test_a_missing_key_in_the_words_of_each_audience() -> None:
    with pytest.raises(MissingSettingError) as caught:
        resolve_model("anthropic:claude-haiku-4-5", environ={})
    assert "pass api_key=... or set ANTHROPIC_API_KEY" in str(caught.value)
    assert "api_key=" not in caught.value.for_files()
    assert "set ANTHROPIC_API_KEY in the environment or in a .env file" in caught.value.for_files()
    with pytest.raises(MissingSettingError) as caught:
        resolve_model("openai-compatible:x", environ={})
    assert "base_url in the model's settings" in caught.value.for_files()


def test_keys_come_from_the_environment_given() -> None:
    model = resolve_model("openai:gpt-4o-mini", environ={"OPENAI_API_KEY": "sk-from-dotenv-123"})
    assert model.connection._key == "sk-from-dotenv-123"


def test_the_builtin_aliases_are_anthropic_models() -> None:
    model = resolve_model("sonnet", environ={"ANTHROPIC_API_KEY": "sk-ant-0123456789"})
    assert isinstance(model, AnthropicModel)
    assert model.name == BUILTIN_ALIASES["sonnet"] == "anthropic:claude-sonnet-4-6"
    assert set(BUILTIN_ALIASES) == {"sonnet", "opus", "haiku"}


def test_unknown_names_and_providers_get_a_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown model 'sonet' \(did you mean 'sonnet'\?\)"):
        resolve_model("sonet", environ={})
    with pytest.raises(
        ConfigError, match=r"unknown model provider 'opnai' \(did you mean 'openai'"
    ):
        resolve_model("opnai:gpt-4o", environ={})
    with pytest.raises(ConfigError, match="only meaningful in a sub-agent"):
        resolve_model("inherit", environ={})


def test_the_user_alias_file_and_a_spec_table_layer_over_the_builtins(
    own_config_folder: Path,
) -> None:
    folder = own_config_folder / "orchestrator"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.yaml").write_text(
        f"local: {{name: openai-compatible:qwen3, base_url: {LOCAL}, stream: false}}\n"
        "sonnet: openai:gpt-4o\n",
        encoding="utf-8",
    )
    aliases = ModelAliases.standard({"cheap": {"name": "local", "temperature": 0}})

    cheap = aliases.expand("cheap")
    assert cheap.name == "openai-compatible:qwen3"
    assert cheap.options() == {"base_url": LOCAL, "stream": False, "temperature": 0.0}
    assert aliases.expand("sonnet").name == "openai:gpt-4o"  # the user's file wins
    assert aliases.expand({"name": "local", "stream": True}).stream is True


def test_alias_cycles_and_bad_files_are_config_errors(own_config_folder: Path) -> None:
    with pytest.raises(ConfigError, match="model alias cycle: a -> b -> a"):
        ModelAliases({"a": "b", "b": "a"}).expand("a")
    folder = own_config_folder / "orchestrator"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.yaml").write_text("local: {name: openai:x, timeout: -1}\n")
    with pytest.raises(ConfigError, match=r"models.yaml: local.timeout: Input should be greater"):
        ModelAliases.standard()


def test_a_sub_agent_takes_an_alias_a_mapping_or_inherit(tmp_path: Path) -> None:
    def definition(model: str) -> ModelSettings | None:
        path = tmp_path / "agent.md"
        path.write_text(f"---\nname: a\ndescription: d\nmodel: {model}\n---\nBody.\n")
        return parse_subagent(path).model

    assert definition("inherit") is None
    assert definition("haiku") == ModelSettings.model_validate("haiku")
    mapped = definition(f"{{name: openai-compatible:q, base_url: {LOCAL}, stream: false}}")
    assert mapped is not None and mapped.stream is False
