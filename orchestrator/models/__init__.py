"""Models: the ChatModel protocol, its adapters, and `resolve_model`."""

from .adapter import UnusableStreamError
from .aliases import (
    BUILTIN_ALIASES,
    DEFAULT_ALIAS,
    INHERIT,
    ModelAliases,
    ModelRef,
    user_alias_file,
)
from .anthropic import AnthropicModel, AnthropicOptions
from .base import (
    ChatModel,
    ForcedTool,
    ModelRequest,
    ModelResponse,
    ToolChoice,
    WireOptions,
    output_cap,
)
from .endpoint import close_connections
from .http import Connection, ConnectionSettings
from .openai import OpenAIChatModel, OpenAIOptions
from .providers import PRESETS, MissingSettingError
from .registry import PROVIDERS, check_model, resolve_model
from .replay import ReplayMismatch, ReplayModel
from .retry import RetryPolicy
from .scripted import ScriptedModel
from .settings import OPTION_NAMES, ModelSettings
from .tap import TextSink, TextTap

__all__ = [
    "BUILTIN_ALIASES",
    "DEFAULT_ALIAS",
    "INHERIT",
    "OPTION_NAMES",
    "PRESETS",
    "PROVIDERS",
    "AnthropicModel",
    "AnthropicOptions",
    "ChatModel",
    "Connection",
    "ConnectionSettings",
    "ForcedTool",
    "MissingSettingError",
    "ModelAliases",
    "ModelRef",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OpenAIChatModel",
    "OpenAIOptions",
    "ReplayMismatch",
    "ReplayModel",
    "RetryPolicy",
    "ScriptedModel",
    "TextSink",
    "TextTap",
    "ToolChoice",
    "UnusableStreamError",
    "WireOptions",
    "close_connections",
    "output_cap",
    "check_model",
    "resolve_model",
    "user_alias_file",
]
