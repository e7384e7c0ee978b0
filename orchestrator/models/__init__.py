"""Models: the ChatModel protocol, its adapters, and `resolve_model`."""

from .anthropic import AnthropicModel, AnthropicOptions
from .base import ChatModel, ForcedTool, ModelRequest, ModelResponse, ToolChoice
from .endpoint import close_connections
from .http import Connection, ConnectionSettings
from .openai import OpenAIChatModel, OpenAIOptions
from .providers import PRESETS
from .registry import PROVIDERS, resolve_model
from .replay import ReplayMismatch, ReplayModel
from .retry import RetryPolicy
from .scripted import ScriptedModel

__all__ = [
    "PRESETS",
    "PROVIDERS",
    "AnthropicModel",
    "AnthropicOptions",
    "ChatModel",
    "Connection",
    "ConnectionSettings",
    "ForcedTool",
    "ModelRequest",
    "ModelResponse",
    "OpenAIChatModel",
    "OpenAIOptions",
    "ReplayMismatch",
    "ReplayModel",
    "RetryPolicy",
    "ScriptedModel",
    "ToolChoice",
    "close_connections",
    "resolve_model",
]
