"""Models: the protocol, test doubles, and real adapters.

``OpenAIModel`` and ``AnthropicModel`` import their SDKs (the ``openai`` and ``anthropic`` extras) only when
constructed, so importing this package needs neither; their modules are imported when first named.
"""

from typing import TYPE_CHECKING

from stopwise._lazy import lazy
from stopwise.models._registry import resolve_model
from stopwise.models._validate import ReplyLimits
from stopwise.models.base import Model, ModelRequest, StreamingModel, ToolSpec, stream_reply
from stopwise.models.testing import FunctionModel, ScriptedModel

if TYPE_CHECKING:
    from stopwise.models.anthropic import AnthropicModel
    from stopwise.models.openai import OpenAIModel

__all__ = [
    "AnthropicModel",
    "FunctionModel",
    "Model",
    "ModelRequest",
    "OpenAIModel",
    "ReplyLimits",
    "ScriptedModel",
    "StreamingModel",
    "ToolSpec",
    "resolve_model",
    "stream_reply",
]

__getattr__ = lazy(__name__, {"AnthropicModel": "stopwise.models.anthropic", "OpenAIModel": "stopwise.models.openai"})
