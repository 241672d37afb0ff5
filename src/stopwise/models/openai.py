"""``OpenAIModel``: OpenAI chat completions, and any server that speaks the same API (Ollama, vLLM, llama.cpp
server, LM Studio) through ``base_url``. Needs the ``openai`` extra: ``pip install 'stopwise[openai]'``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from stopwise.errors import ConfigError, ModelError
from stopwise.messages import Message, Reply, Role, StopReason, TokenLogprob, ToolCall, Usage
from stopwise.models._sdk import (
    ClientPerLoop,
    api_key,
    check_options,
    check_settings,
    import_sdk,
    malformed,
    parse_args,
    translated,
    wire_ids,
)
from stopwise.models.base import ModelRequest

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel"]

_STOP_REASONS = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.CONTENT_FILTER,
}
_PLACEHOLDER_KEY = "unused"
"""Sent to an OpenAI-compatible server when no key is configured: the SDK insists on one, local servers
ignore it."""


class OpenAIModel:
    """A model behind the OpenAI chat completions API.

    ``OpenAIModel("gpt-4.1-mini")`` calls OpenAI with ``OPENAI_API_KEY`` (or ``api_key=``); a missing key raises
    ``ConfigError`` here, not mid-run. With ``base_url`` it calls any OpenAI-compatible server instead; the key
    then comes from ``api_key=`` or ``OPENAI_COMPATIBLE_API_KEY`` (``OPENAI_API_KEY`` is never sent to another
    server), and may be absent.

    Rate limits (429), timeouts and 5xx answers are retried by the SDK, ``max_retries`` times with exponential
    backoff that honours ``retry-after``; what still fails raises ``ModelError`` with the provider's status and
    request id. ``timeout`` (seconds per request; default the SDK's) bounds each attempt. ``logprobs=True`` asks
    for token log-probabilities (``top_logprobs`` alternatives per token) and puts them on ``Reply.logprobs``.
    ``settings`` are extra request parameters passed as they are (``temperature``, ``max_completion_tokens``,
    ``seed``, ...). ``client`` uses a ready ``AsyncOpenAI`` (e.g. with a custom HTTP client) instead of making
    one; ``api_key``, ``base_url``, ``max_retries`` and ``timeout`` are then ignored.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        parallel_tool_calls: bool | None = None,
        settings: Mapping[str, Any] | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model", f"OpenAIModel needs a model name, got {model!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError("model", f"OpenAIModel max_retries must be an int >= 0, got {max_retries!r}")
        if not isinstance(logprobs, bool):
            raise ConfigError("model", f"OpenAIModel logprobs must be True or False, got {logprobs!r}")
        if top_logprobs is not None and not logprobs:
            raise ConfigError("model", "OpenAIModel top_logprobs needs logprobs=True")
        if top_logprobs is not None and (
            isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 0 <= top_logprobs <= 20
        ):
            raise ConfigError("model", f"OpenAIModel top_logprobs must be an int from 0 to 20, got {top_logprobs!r}")
        if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
            raise ConfigError(
                "model", f"OpenAIModel parallel_tool_calls must be True, False or None, got {parallel_tool_calls!r}"
            )
        check_options("OpenAIModel", base_url=base_url, api_key=api_key, timeout=timeout, settings=settings)
        self._sdk = import_sdk("openai", extra="openai")
        self.model = model
        self.base_url = base_url
        self.provider = "openai" if base_url is None else "openai-compatible"
        """The provider named in ``ModelError`` and in a failed run's ``error.details``."""
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.parallel_tool_calls = parallel_tool_calls
        self.settings: Mapping[str, Any] = dict(settings or {})
        create = self._sdk.resources.chat.completions.AsyncCompletions.create
        check_settings(self.settings, create, self._sdk, "OpenAIModel")
        if client is not None:
            self._clients: ClientPerLoop[AsyncOpenAI] | None = None
            self._client = client
            return
        # OPENAI_API_KEY goes to OpenAI only; a compatible server gets its own key, or a placeholder.
        key = _api_key_or_raise(api_key) if base_url is None else api_key or _env_key() or _PLACEHOLDER_KEY
        options: dict[str, Any] = {"api_key": key, "base_url": base_url, "max_retries": max_retries}
        if timeout is not None:
            options["timeout"] = timeout
        self._clients = ClientPerLoop(lambda: self._sdk.AsyncOpenAI(**options))

    def __repr__(self) -> str:
        where = "" if self.base_url is None else f", base_url={self.base_url!r}"
        return f"OpenAIModel({self.model!r}{where})"

    async def generate(self, request: ModelRequest) -> Reply:
        """One chat completion for ``request``; raises ``ModelError`` when the provider fails."""
        with translated(self._sdk, self.provider):
            completion = await self._sdk_client().chat.completions.create(**self.request_params(request))
            return _reply(completion, self.provider)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
        """Text deltas as the server sends them, then the whole ``Reply`` (see ``StreamingModel``)."""
        params = {**self.request_params(request), "stream": True, "stream_options": {"include_usage": True}}
        state = _StreamState()
        with translated(self._sdk, self.provider):
            chunks = await self._sdk_client().chat.completions.create(**params)
            try:
                async for chunk in chunks:
                    delta = state.add(chunk)
                    if delta:
                        yield delta
            finally:
                await chunks.close()
            reply = state.reply(self.provider)
        yield reply

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request`` (without streaming)."""
        wire = wire_ids(request.messages)
        params: dict[str, Any] = {"model": self.model, "messages": [_message(m, wire) for m in request.messages]}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
                }
                for t in request.tools
            ]
            if self.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = self.parallel_tool_calls
            if request.tool_choice in ("auto", "required", "none"):
                params["tool_choice"] = request.tool_choice
            elif request.tool_choice is not None:
                params["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        if request.output_schema is not None:
            params["response_format"] = _response_format(request.output_schema)
        if self.logprobs:
            params["logprobs"] = True
            if self.top_logprobs is not None:
                params["top_logprobs"] = self.top_logprobs
        params.update(self.settings)
        if request.max_output_tokens is not None:
            _cap(params, request.max_output_tokens, "max_completion_tokens" if self.base_url is None else "max_tokens")
        return params

    def _sdk_client(self) -> AsyncOpenAI:
        return self._client if self._clients is None else self._clients.get()


_CAP_FIELDS = ("max_completion_tokens", "max_tokens")


def _cap(params: dict[str, Any], cap: int, default_field: str) -> None:
    """Bound the reply's output tokens by the request's cap in ``params``: in the field the settings already use
    (each, if both), lowered to the cap; else in ``default_field``. OpenAI's own field is
    ``max_completion_tokens`` (``max_tokens`` is deprecated and refused by its reasoning models); the servers that
    speak the same API (Ollama, vLLM, llama.cpp, LM Studio) all take ``max_tokens``."""
    used = [name for name in _CAP_FIELDS if params.get(name) is not None]
    for name in used or [default_field]:
        own = params.get(name)
        params[name] = cap if own is None else min(own, cap)


def _api_key_or_raise(given: str | None) -> str:
    return api_key(given, "OPENAI_API_KEY", "OpenAIModel")


def _env_key() -> str | None:
    return os.environ.get("OPENAI_COMPATIBLE_API_KEY") or None


def _message(m: Message, wire: Mapping[str, str]) -> dict[str, Any]:
    if m.role is Role.TOOL:
        call_id = m.tool_call_id or ""
        return {"role": "tool", "tool_call_id": wire.get(call_id, call_id), "content": m.content}
    if m.role is Role.ASSISTANT and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": c.wire_id or c.id,
                    "type": "function",
                    # A raw string is what the model sent; give it back as it was.
                    "function": {"name": c.name, "arguments": _arguments(c)},
                }
                for c in m.tool_calls
            ],
        }
    return {"role": m.role.value, "content": m.content}


def _arguments(call: ToolCall) -> str:
    return call.args if isinstance(call.args, str) else json.dumps(call.args, ensure_ascii=False)


def _response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    # The API wants a name of at most 64 of [A-Za-z0-9_-]. Not strict: strict mode needs every property
    # required and additionalProperties false, which ordinary pydantic schemas are not; the loop validates.
    title = schema.get("title")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64] if isinstance(title, str) and title else "output"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": False}}


def _stop_reason(finish: str | None, has_calls: bool, refused: bool) -> StopReason:
    if refused:
        return StopReason.REFUSAL
    if finish == "length":
        # Cut at the token cap, calls or not: the last call's arguments may be unfinished, and the loop must know.
        return StopReason.MAX_TOKENS
    if has_calls:
        # Some compatible servers say "stop" for a reply with tool calls; the calls are what matters.
        return StopReason.TOOL_USE
    # A reason we do not know (or none) on a reply without calls: the model ended its turn.
    return _STOP_REASONS.get(finish or "stop", StopReason.END_TURN)


def _usage(usage: Any) -> Usage | None:
    """The usage as the budgets count it. Compatible servers do not all use OpenAI's names: the Responses API's
    ``input_tokens`` / ``output_tokens`` are read too, and a usage of only ``total_tokens`` counts what it does not
    split as output (a budget is never dodged by a server's field names; the output budget errs toward spent)."""
    if usage is None:
        return None
    prompt = _count(usage, "prompt_tokens", "input_tokens")
    completion = _count(usage, "completion_tokens", "output_tokens")
    total = _count(usage, "total_tokens")
    if completion is None and total is not None:
        completion = max(0, total - (prompt or 0))
    return Usage(prompt or 0, completion or 0, 1)


def _count(usage: Any, *names: str) -> int | None:
    """The first of ``names`` the usage object carries as a whole number (the SDK keeps unknown fields)."""
    for name in names:
        value = getattr(usage, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _logprobs(content: Any) -> list[TokenLogprob]:
    return [
        TokenLogprob(t.token, t.logprob, tuple((a.token, a.logprob) for a in (t.top_logprobs or ())))
        for t in content or ()
    ]


def _reply(completion: Any, provider: str) -> Reply:
    choices = getattr(completion, "choices", None)
    if not choices:
        raise malformed(provider, "no choices in the completion")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise malformed(provider, "the first choice has no message")
    calls = [
        ToolCall(c.function.name, parse_args(c.function.arguments), id=c.id or "")
        for c in message.tool_calls or ()
        if getattr(c, "function", None) is not None
    ]
    refusal = getattr(message, "refusal", None)
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise malformed(provider, f"the message's content is {type(content).__name__}, not a string or null")
    stop_reason = _stop_reason(choice.finish_reason, bool(calls), bool(refusal) and not content)
    if content is None and not calls and not refusal:
        _check_not_empty(stop_reason, provider)
    choice_logprobs = getattr(choice, "logprobs", None)
    logprobs = None if choice_logprobs is None else tuple(_logprobs(choice_logprobs.content))
    return Reply(
        text=content or refusal or "",
        tool_calls=calls,
        stop_reason=stop_reason,
        usage=_usage(completion.usage),
        logprobs=logprobs,
    )


_CUT_SHORT = frozenset({StopReason.MAX_TOKENS, StopReason.CONTENT_FILTER})


def _check_not_empty(stop_reason: StopReason, provider: str) -> None:
    """Raise for a reply with null content, no tool call and no refusal that was not cut short: the model sent
    nothing, which is not an answer (read as one, the run would complete with ""), nor the calls a "tool_calls"
    finish promises. A reply cut short (length, content filter) may be empty: its stop reason ends the run with
    its own code."""
    if stop_reason not in _CUT_SHORT:
        raise malformed(provider, "the message has null content, no tool calls and no refusal")


class _StreamState:
    """What the chunks of a streamed completion add up to."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish: str | None = None
        self.usage: Usage | None = None
        self.logprobs: list[TokenLogprob] | None = None
        self.chunks = 0
        self.content = False
        """Whether any chunk carried a content field (even ""): a stream without one sent null content."""

    def add(self, chunk: Any) -> str:
        """Take one chunk in; return its text delta ("" if none)."""
        self.chunks += 1
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        delta_text = ""
        for choice in getattr(chunk, "choices", None) or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                self.content = self.content or delta.content is not None
                if delta.content:
                    self.text.append(delta.content)
                    delta_text += delta.content
                if getattr(delta, "refusal", None):
                    self.refusal.append(delta.refusal)
                    delta_text += delta.refusal
                for call in delta.tool_calls or ():
                    slot = self.calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    if call.function is not None:
                        slot["name"] += call.function.name or ""
                        slot["arguments"] += call.function.arguments or ""
            if choice.finish_reason is not None:
                self.finish = choice.finish_reason
            if getattr(choice, "logprobs", None) is not None:
                self.logprobs = (self.logprobs or []) + _logprobs(choice.logprobs.content)
        return delta_text

    def reply(self, provider: str) -> Reply:
        if self.chunks == 0:
            raise malformed(provider, "the stream ended without a chunk")
        if self.finish is None:
            # A dropped connection ends the stream as quietly as a finished reply: without a finish_reason the
            # text so far is a fragment, never an answer (nor calls to run).
            raise ModelError(
                f"{provider}'s stream ended before a finish_reason (the reply was cut off)",
                provider=provider,
                retryable=True,
            )
        calls = [ToolCall(c["name"], parse_args(c["arguments"]), id=c["id"]) for _, c in sorted(self.calls.items())]
        refused = bool(self.refusal) and not self.text
        stop_reason = _stop_reason(self.finish, bool(calls), refused)
        if not self.content and not calls and not self.refusal:
            _check_not_empty(stop_reason, provider)
        return Reply(
            text="".join(self.text) + "".join(self.refusal),
            tool_calls=calls,
            stop_reason=stop_reason,
            usage=self.usage,
            logprobs=None if self.logprobs is None else tuple(self.logprobs),
        )
