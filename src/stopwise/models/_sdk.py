"""What the provider adapters share: lazy SDK import, API keys, one SDK client per event loop, and the
translation of SDK exceptions into ``ModelError``.

The ``openai`` and ``anthropic`` SDKs are optional extras. Nothing here imports them at module import time, so
``import stopwise`` works without them; an adapter imports its SDK when it is constructed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import math
import os
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, Generic, TypeVar

from stopwise.errors import ConfigError, ModelError
from stopwise.messages import Message

__all__ = [
    "ClientPerLoop",
    "api_key",
    "check_options",
    "check_settings",
    "import_sdk",
    "parse_args",
    "provider_error",
    "wire_ids",
]

_C = TypeVar("_C")

# Statuses after which the same request may succeed later: timeouts, lock conflicts, rate limits, outages.
_RETRYABLE_STATUS = frozenset({408, 409, 429})


def import_sdk(module: str, extra: str) -> ModuleType:
    """Import a provider SDK, or raise ``ConfigError`` (field ``model``) saying which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            "model", f"the {module!r} package is not installed ({exc}): pip install 'stopwise[{extra}]'"
        ) from None


def api_key(given: str | None, env_var: str, cls_name: str) -> str:
    """The explicit key, else the environment variable; ``ConfigError`` naming the variable when neither is set."""
    key = given if given is not None else os.environ.get(env_var)
    if not key:
        raise ConfigError("model", f"{env_var} is not set: export {env_var}=..., or pass api_key=... to {cls_name}")
    return key


class ClientPerLoop(Generic[_C]):
    """One SDK client per running event loop.

    An SDK client keeps a pool of connections bound to the loop it first ran on; ``Runner.run_sync`` and the
    CLI start a new loop per call, so a client made once and reused would hand a later loop dead connections.
    """

    def __init__(self, factory: Callable[[], _C]) -> None:
        self._factory = factory
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _C] = weakref.WeakKeyDictionary()

    def get(self) -> _C:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._factory()
        return client


def parse_args(raw: str | None) -> dict[str, Any] | str:
    """Tool-call arguments as sent by the model: the decoded object, or the raw string when it is not a JSON
    object (the loop turns that into an error result the model can read). An empty string means no arguments.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to decode: the loop refuses the raw text
        return raw
    return value if isinstance(value, dict) else raw


def check_options(cls_name: str, *, base_url: object, api_key: object, timeout: object, settings: object) -> None:
    """Raise ``ConfigError`` for the connection options an adapter shares when one is of the wrong kind: a base URL
    that is not http(s), a key that is not a string, a timeout that is not positive finite seconds, settings that
    are not a mapping (each would otherwise fail inside the SDK, at the first call or never clearly)."""
    if base_url is not None and (not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))):
        raise ConfigError("model", f"{cls_name} base_url must be an http:// or https:// URL, got {base_url!r}")
    if api_key is not None and not isinstance(api_key, str):
        raise ConfigError("model", f"{cls_name} api_key must be a string, got {type(api_key).__name__}")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (timeout > 0 and math.isfinite(timeout))
    ):
        raise ConfigError("model", f"{cls_name} timeout must be positive finite seconds or None, got {timeout!r}")
    if settings is not None and not isinstance(settings, Mapping):
        raise ConfigError("settings", f"{cls_name} settings must be a mapping, got {type(settings).__name__}")


def check_settings(settings: Mapping[str, Any], create: Callable[..., Any], sdk: ModuleType, cls_name: str) -> None:
    """Raise ``ConfigError`` (field ``settings``) for a key that the installed SDK's ``create`` does not take, so a
    typo or a parameter this SDK version dropped fails when the model is defined, not as a failed run."""
    accepted = inspect.signature(create).parameters
    unknown = [k for k in settings if k not in accepted]
    if unknown:
        version = getattr(sdk, "__version__", "?")
        names = ", ".join(sorted(p for p in accepted if not p.startswith("extra_") and p not in ("self", "timeout")))
        raise ConfigError(
            "settings",
            f"{', '.join(map(repr, unknown))} is not a parameter of {cls_name} with the installed {sdk.__name__} "
            f"{version} (it takes: {names}); to send it anyway, put it in settings={{'extra_body': {{...}}}}",
        )


def wire_ids(messages: Sequence[Message]) -> dict[str, str]:
    """Stopwise call id -> the provider's own id, for the calls whose id the loop replaced (``ToolCall.wire_id``):
    replaying the history, an adapter sends the provider back the ids it sent."""
    return {c.id: c.wire_id for m in messages for c in m.tool_calls if c.wire_id is not None}


def provider_error(sdk: ModuleType, exc: Exception, provider: str) -> ModelError | None:
    """The ``ModelError`` for an exception raised by a call through ``sdk``, or None if it is not a provider
    failure (a bug of ours, which should propagate as it is).

    Both SDKs name their exceptions alike (``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``,
    ``APIResponseValidationError``); the SDK has already retried what it retries when one reaches us.
    """
    if isinstance(exc, sdk.APIStatusError):
        status: int = exc.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500
        message = _status_message(exc.body) or str(exc)
        return ModelError(
            f"{provider} answered HTTP {status}: {message}",
            provider=provider,
            status=status,
            request_id=getattr(exc, "request_id", None),
            retryable=retryable,
        )
    if isinstance(exc, sdk.APITimeoutError):
        return ModelError(f"{provider}: the request timed out", provider=provider, retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return ModelError(f"{provider}: connection failed: {exc}", provider=provider, retryable=True)
    if isinstance(exc, sdk.APIResponseValidationError):
        return malformed(provider, str(exc), status=exc.status_code)
    if isinstance(exc, json.JSONDecodeError):  # a body (or a streamed event) that is not JSON
        return malformed(provider, f"{type(exc).__name__}: {exc}")
    return None


def malformed(provider: str, problem: str, *, status: int | None = None) -> ModelError:
    """A response we cannot read: not JSON, or JSON without the fields of the provider's format."""
    return ModelError(f"{provider} sent a malformed response: {problem}", provider=provider, status=status)


def _status_message(body: object) -> str | None:
    # OpenAI-style bodies arrive as the inner {"message": ...}; Anthropic's as {"type": "error", "error": {...}}.
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict):
            body = inner
        message = body.get("message") if isinstance(body, dict) else None
        if isinstance(message, str) and message:
            return message
    return None


@contextlib.contextmanager
def translated(sdk: ModuleType, provider: str) -> Iterator[None]:
    """Turn a provider failure raised inside the block into ``ModelError``; anything else propagates as it is."""
    try:
        yield
    except ModelError:
        raise
    except Exception as exc:
        error = provider_error(sdk, exc, provider)
        if error is None:
            raise
        raise error from exc
