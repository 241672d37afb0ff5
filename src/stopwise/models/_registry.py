"""Model strings: ``Agent(model="openai:gpt-4.1-mini")`` and the like, turned into adapters.

Grammar (the provider prefix ends at the first colon; the rest is the provider's own model name)::

    openai:MODEL                         OpenAIModel(MODEL), key from OPENAI_API_KEY
    anthropic:MODEL                      AnthropicModel(MODEL), key from ANTHROPIC_API_KEY
    openai-compatible:BASE_URL#MODEL     OpenAIModel(MODEL, base_url=BASE_URL), key from
                                         OPENAI_COMPATIBLE_API_KEY if set (local servers need none)

e.g. ``openai-compatible:http://127.0.0.1:11434/v1#llama3.1`` for a local Ollama. The model name after ``#``
may hold colons (``llama3.1:8b``); BASE_URL must be an ``http://`` or ``https://`` URL.
"""

from __future__ import annotations

from stopwise.errors import ConfigError
from stopwise.models.base import Model

__all__ = ["PROVIDERS", "resolve_model"]

PROVIDERS = ("openai", "anthropic", "openai-compatible")
"""The prefixes a model string may start with."""

_GRAMMAR = "openai:MODEL, anthropic:MODEL or openai-compatible:BASE_URL#MODEL"


def resolve_model(spec: str) -> Model:
    """The adapter a model string names; see the module docstring for the grammar.

    Raises ``ConfigError`` (field ``model``) for a string that does not parse, an unknown provider, a missing API
    key (naming the variable to set) or a missing SDK (naming the extra to install). Nothing is sent anywhere:
    the first request is made by the first step of a run.
    """
    if not isinstance(spec, str):
        raise ConfigError("model", f"a model string must be a str, got {type(spec).__name__}")
    # The adapters are imported here, by who names one, not by ``import stopwise`` (see ``models/__init__``).
    from stopwise.models.anthropic import AnthropicModel
    from stopwise.models.openai import OpenAIModel

    provider, colon, rest = spec.strip().partition(":")
    if not colon:
        raise ConfigError("model", f"{spec!r} is not a model string: expected {_GRAMMAR}")
    if provider == "openai":
        return OpenAIModel(_name(rest, spec))
    if provider == "anthropic":
        return AnthropicModel(_name(rest, spec))
    if provider == "openai-compatible":
        base_url, hash_, model = rest.rpartition("#")
        if not hash_ or not base_url:
            raise ConfigError("model", f"{spec!r}: expected openai-compatible:BASE_URL#MODEL")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError("model", f"{spec!r}: BASE_URL must start with http:// or https://, got {base_url!r}")
        return OpenAIModel(_name(model, spec), base_url=base_url)
    known = ", ".join(f"{p}:" for p in PROVIDERS)
    raise ConfigError("model", f"unknown provider {provider!r} in {spec!r}: use one of {known} ({_GRAMMAR})")


def _name(model: str, spec: str) -> str:
    if not model.strip():
        raise ConfigError("model", f"{spec!r} names no model: expected {_GRAMMAR}")
    return model.strip()
