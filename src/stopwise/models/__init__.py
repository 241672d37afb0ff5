"""Models: the protocol, test doubles, and (behind extras) real adapters."""

from stopwise.models.base import Model, ModelRequest, ToolSpec
from stopwise.models.testing import FunctionModel, ScriptedModel

__all__ = ["FunctionModel", "Model", "ModelRequest", "ScriptedModel", "ToolSpec"]
