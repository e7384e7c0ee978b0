"""Provider presets, environment variables and `resolve_model`."""

from __future__ import annotations

import pytest

from orchestrator import Agent
from orchestrator.errors import ConfigError
from orchestrator.models import AnthropicModel, OpenAIChatModel, resolve_model
from orchestrator.models.settings import PRESETS

KEY = "sk-test-0123456789abcdef"
ENV_NAMES = {name for p in PRESETS.values() for name in (p.base_url_env, p.key_env) if name}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


def openai_model(model: object) -> OpenAIChatModel:
    assert isinstance(model, OpenAIChatModel)
    return model


def test_openai_from_arguments() -> None:
    model = openai_model(
        resolve_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1/", api_key=KEY)
    )
    assert model.name == "openai:gpt-4o-mini"
    assert model.model == "gpt-4o-mini"
    assert model.connection.base_url == "http://127.0.0.1:9/v1"
    assert model.connection.auth == "bearer"
    assert model.options.max_tokens_field == "max_completion_tokens"
    assert KEY not in repr(model) and KEY not in repr(model.connection.settings)


def test_openai_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = openai_model(resolve_model("openai:gpt-4o"))
    assert model.connection.base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert openai_model(resolve_model("openai:gpt-4o")).connection.base_url == (
        "http://127.0.0.1:8000/v1"
    )


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"),
    ],
)
def test_a_missing_key_is_a_clear_config_error(model: str, variable: str) -> None:
    with pytest.raises(ConfigError, match=f"no API key: pass api_key=... or set {variable}"):
        resolve_model(model)


def test_ollama_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = openai_model(resolve_model("ollama:llama3.2"))
    assert model.connection.base_url == "http://localhost:11434/v1"
    assert model.connection.settings.api_key is None
    assert model.options.max_tokens_field == "max_tokens"
    assert openai_model(resolve_model("ollama:qwen3:8b")).model == "qwen3:8b"
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9999/v1")
    assert openai_model(resolve_model("ollama:qwen3")).connection.base_url == (
        "http://127.0.0.1:9999/v1"
    )


def test_deepseek_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    model = openai_model(resolve_model("deepseek:deepseek-reasoner"))
    assert model.connection.base_url == "https://api.deepseek.com"
    assert model.connection.settings.api_key is not None
    assert model.connection.settings.api_key.get_secret_value() == KEY


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigError, match="no base URL: pass base_url=... or set OPENAI_BASE_URL"):
        resolve_model("openai-compatible:qwen")


def test_openai_compatible_sends_the_environment_key_only_with_the_environment_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    given = openai_model(resolve_model("openai-compatible:qwen", base_url="http://127.0.0.1:1/v1"))
    assert given.connection.settings.api_key is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:2/v1")
    from_env = openai_model(resolve_model("openai-compatible:qwen"))
    assert from_env.connection.settings.api_key is not None


def test_anthropic_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    model = resolve_model("anthropic:claude-sonnet-4-5", stream=False, max_retries=0)
    assert isinstance(model, AnthropicModel)
    assert model.connection.base_url == "https://api.anthropic.com"
    assert model.connection.auth == "x-api-key"
    assert model.options.stream is False
    assert model.connection.retry.max_retries == 0


def test_agent_accepts_a_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    agent = Agent(model="anthropic:claude-sonnet-4-5")
    assert isinstance(agent.model, AnthropicModel)
    assert agent.model.name == "anthropic:claude-sonnet-4-5"


def test_bad_options_are_config_errors_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="colour: unknown option"):
        resolve_model("ollama:x", colour="blue")
    with pytest.raises(ConfigError, match="base_url: Value error, must start with http"):
        resolve_model("ollama:x", base_url="localhost:11434")
    with pytest.raises(ConfigError, match="max_concurrency: Input should be greater"):
        resolve_model("ollama:x", max_concurrency=0)


def test_models_of_one_endpoint_share_its_client_and_limit() -> None:
    one = openai_model(resolve_model("openai:a", base_url="http://127.0.0.1:7/v1", api_key=KEY))
    two = openai_model(resolve_model("openai:b", base_url="http://127.0.0.1:7/v1", api_key=KEY))
    other = openai_model(
        resolve_model("openai:a", base_url="http://127.0.0.1:7/v1", api_key=KEY + "x")
    )
    assert one.connection.endpoint is two.connection.endpoint
    assert one.connection.endpoint is not other.connection.endpoint
