"""``AnthropicModel``: Anthropic's messages API. Needs the ``anthropic`` extra:
``pip install 'stopwise[anthropic]'``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stopwise.errors import ConfigError, ModelError
from stopwise.messages import TOOL_ERROR, Message, Reply, Role, StopReason, ToolCall, Usage
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
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel"]

_STOP_REASONS = {
    "end_turn": StopReason.END_TURN,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
}
_CACHE_FIELDS = ("cache_creation_input_tokens", "cache_read_input_tokens")
_OUTPUT_INSTRUCTION = (
    "When you give your final answer, reply with only a JSON object that matches this JSON schema "
    "(no prose, no code fence):\n"
)


class AnthropicModel:
    """A model behind Anthropic's messages API.

    ``AnthropicModel("claude-sonnet-4-5")`` calls Anthropic with ``ANTHROPIC_API_KEY`` (or ``api_key=``); a missing
    key raises ``ConfigError`` here, not mid-run. ``max_tokens`` is the reply's token limit, which the API requires.

    The request's system rows become the ``system`` parameter; its tool rows become ``tool_result`` blocks in a
    user turn; consecutive turns of one role are merged, as the API requires. With an output schema (an agent's
    ``output_type``) the schema is added to the system prompt, since the API has no JSON mode every version
    supports. Rate limits (429), overload (529), timeouts and 5xx are retried by the SDK, ``max_retries`` times
    with backoff that honours ``retry-after``; what still fails raises ``ModelError`` with the status and request
    id. ``settings`` are extra request parameters passed as they are (``temperature``, ``stop_sequences``, ...);
    ``client`` uses a ready ``AsyncAnthropic`` instead of making one. Anthropic has no token log-probabilities:
    ``Reply.logprobs`` stays None.
    """

    provider = "anthropic"
    """The provider named in ``ModelError`` and in a failed run's ``error.details``."""

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 4096,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        settings: Mapping[str, Any] | None = None,
        client: AsyncAnthropic | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model", f"AnthropicModel needs a model name, got {model!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError("model", f"AnthropicModel max_tokens must be an int >= 1, got {max_tokens!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError("model", f"AnthropicModel max_retries must be an int >= 0, got {max_retries!r}")
        check_options("AnthropicModel", base_url=base_url, api_key=api_key, timeout=timeout, settings=settings)
        self._sdk = import_sdk("anthropic", extra="anthropic")
        self.model = model
        self.max_tokens = max_tokens
        self.base_url = base_url
        self.settings: Mapping[str, Any] = dict(settings or {})
        check_settings(self.settings, self._sdk.resources.messages.AsyncMessages.create, self._sdk, "AnthropicModel")
        if client is not None:
            self._clients: ClientPerLoop[AsyncAnthropic] | None = None
            self._client = client
            return
        options: dict[str, Any] = {
            "api_key": _api_key_or_raise(api_key),
            "base_url": base_url,
            "max_retries": max_retries,
        }
        if timeout is not None:
            options["timeout"] = timeout
        self._clients = ClientPerLoop(lambda: self._sdk.AsyncAnthropic(**options))

    def __repr__(self) -> str:
        where = "" if self.base_url is None else f", base_url={self.base_url!r}"
        return f"AnthropicModel({self.model!r}{where})"

    async def generate(self, request: ModelRequest) -> Reply:
        """One message for ``request``; raises ``ModelError`` when the provider fails."""
        with translated(self._sdk, self.provider):
            message = await self._sdk_client().messages.create(**self.request_params(request))
            return _reply(message, self.provider)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
        """Text deltas as the server sends them, then the whole ``Reply`` (see ``StreamingModel``)."""
        state = _StreamState()
        with translated(self._sdk, self.provider):
            events = await self._sdk_client().messages.create(**self.request_params(request), stream=True)
            try:
                async for event in events:
                    delta = state.add(event)
                    if delta:
                        yield delta
            finally:
                await events.close()
            reply = state.reply(self.provider)
        yield reply

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request`` (without streaming)."""
        system = [m.content for m in request.messages if m.role is Role.SYSTEM and m.content]
        if request.output_schema is not None:
            system.append(_OUTPUT_INSTRUCTION + json.dumps(request.output_schema, ensure_ascii=False))
        turns = _turns(request.messages)
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": turns}
        if system:
            params["system"] = "\n\n".join(system)
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
            choice = request.tool_choice
            if choice is not None:
                kinds = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
                params["tool_choice"] = kinds.get(choice, {"type": "tool", "name": choice})
        else:
            used = _tools_in_history(turns)
            if used:
                # The API refuses tool_use / tool_result blocks in a request that defines no tools. On a call with
                # tools off (forced completion) declare the ones the history names, and forbid calling them.
                params["tools"] = [
                    {"name": name, "description": "Not available now.", "input_schema": {"type": "object"}}
                    for name in used
                ]
                params["tool_choice"] = {"type": "none"}
        params.update(self.settings)
        if request.max_output_tokens is not None:
            params["max_tokens"] = min(params["max_tokens"], request.max_output_tokens)
            _fit_thinking(params)
        return params

    def _sdk_client(self) -> AsyncAnthropic:
        return self._client if self._clients is None else self._clients.get()


def _api_key_or_raise(given: str | None) -> str:
    return api_key(given, "ANTHROPIC_API_KEY", "AnthropicModel")


def _turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as API turns: system rows left out, tool rows as tool_result blocks of a user turn,
    consecutive turns of one role merged into one."""
    turns: list[dict[str, Any]] = []
    wire = wire_ids(messages)
    for m in messages:
        if m.role is Role.SYSTEM:
            continue
        role = "assistant" if m.role is Role.ASSISTANT else "user"
        blocks = _blocks(m, wire)
        if not blocks:
            continue  # the API refuses empty text blocks and empty turns
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(m: Message, wire: Mapping[str, str]) -> list[dict[str, Any]]:
    if m.role is Role.TOOL:
        call_id = m.tool_call_id or ""
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": wire.get(call_id, call_id)}
        if m.content:
            block["content"] = m.content
        if m.metadata.get(TOOL_ERROR):
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    for call in m.tool_calls:
        # The API takes an object; arguments that were not one (only another provider sends those) become {}.
        arguments = call.args if isinstance(call.args, Mapping) else {}
        blocks.append({"type": "tool_use", "id": call.wire_id or call.id, "name": call.name, "input": dict(arguments)})
    return blocks


def _tools_in_history(turns: list[dict[str, Any]]) -> list[str]:
    names = [b["name"] for t in turns for b in t["content"] if b["type"] == "tool_use"]
    return list(dict.fromkeys(names))


def _stop_reason(reason: str | None, has_calls: bool) -> StopReason:
    if reason in _STOP_REASONS:
        return _STOP_REASONS[reason]
    # A reason we do not know (e.g. pause_turn), or none.
    return StopReason.TOOL_USE if has_calls else StopReason.END_TURN


_MIN_THINKING = 1024
"""The least ``thinking.budget_tokens`` the API takes."""


def _fit_thinking(params: dict[str, Any]) -> None:
    """Keep extended thinking (``settings={"thinking": {"type": "enabled", "budget_tokens": N}}``) within a capped
    ``max_tokens``: the API refuses a request whose thinking budget is not below ``max_tokens``, so a run's token
    cap would otherwise turn into a provider error once less than the thinking budget is left. The thinking budget
    is lowered below the cap, or, under the API's least thinking budget, thinking is left off for this call."""
    thinking = params.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return
    budget, cap = thinking.get("budget_tokens"), params["max_tokens"]
    if not isinstance(budget, int) or budget < cap:
        return
    if cap - 1 >= _MIN_THINKING:
        params["thinking"] = {**thinking, "budget_tokens": cap - 1}
    else:
        del params["thinking"]


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    # input_tokens excludes prompt-cache reads and writes; the total input is their sum.
    cached = (getattr(usage, "cache_creation_input_tokens", 0) or 0) + (
        getattr(usage, "cache_read_input_tokens", 0) or 0
    )
    return Usage((usage.input_tokens or 0) + cached, usage.output_tokens or 0, 1)


def _reply(message: Any, provider: str) -> Reply:
    content = getattr(message, "content", None)
    if content is None or getattr(message, "type", "message") != "message":
        raise malformed(provider, "no content in the message")
    if not isinstance(content, list):
        # The SDK does not validate responses: a string here would be read one character per (unknown) block.
        raise malformed(provider, f"the message's content is {type(content).__name__}, not a list of blocks")
    text: list[str] = []
    calls: list[ToolCall] = []
    for i, block in enumerate(content):
        kind = getattr(block, "type", None)
        if not isinstance(kind, str):
            raise malformed(provider, f"content[{i}] is not a content block (no type)")
        if kind == "text":
            text.append(block.text)
        elif kind == "tool_use":
            # Always an object from Anthropic; anything else is passed on raw, for the loop to refuse.
            arguments = block.input if isinstance(block.input, dict) else json.dumps(block.input)
            calls.append(ToolCall(block.name, arguments, id=block.id))
    return Reply(
        text="".join(text),
        tool_calls=calls,
        stop_reason=_stop_reason(message.stop_reason, bool(calls)),
        usage=_usage(message.usage),
    )


class _StreamState:
    """What the events of a streamed message add up to."""

    def __init__(self) -> None:
        self.started = False
        self.text: list[str] = []
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached = 0

    def add(self, event: Any) -> str:
        """Take one event in; return its text delta ("" if none)."""
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.started = True
            usage = event.message.usage
            self.input_tokens = usage.input_tokens or 0
            self.cached = sum(getattr(usage, name, 0) or 0 for name in _CACHE_FIELDS)
            self.output_tokens = usage.output_tokens or 0
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self.blocks[event.index] = {"id": block.id, "name": block.name, "json": []}
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                self.text.append(delta.text)
                return str(delta.text)
            if delta.type == "input_json_delta" and event.index in self.blocks:
                self.blocks[event.index]["json"].append(delta.partial_json)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            # Usage counts are cumulative. A server may report the input here rather than (or as well as) in
            # message_start (some send 0 there), so the larger count of the two is the input.
            usage = event.usage
            if usage is not None:
                if usage.output_tokens is not None:
                    self.output_tokens = usage.output_tokens
                self.input_tokens = max(self.input_tokens, getattr(usage, "input_tokens", None) or 0)
                self.cached = max(self.cached, sum(getattr(usage, name, None) or 0 for name in _CACHE_FIELDS))
        return ""

    def reply(self, provider: str) -> Reply:
        if not self.started:
            raise malformed(provider, "the stream ended without a message_start event")
        if self.stop_reason is None:
            # A dropped connection ends the stream as quietly as a finished message: without the message_delta's
            # stop_reason the text so far is a fragment, never an answer (nor calls to run).
            raise ModelError(
                f"{provider}'s stream ended before a stop_reason (the message was cut off)",
                provider=provider,
                retryable=True,
            )
        calls = [
            ToolCall(b["name"], parse_args("".join(b["json"])), id=b["id"]) for _, b in sorted(self.blocks.items())
        ]
        return Reply(
            text="".join(self.text),
            tool_calls=calls,
            stop_reason=_stop_reason(self.stop_reason, bool(calls)),
            usage=Usage(self.input_tokens + self.cached, self.output_tokens, 1),
        )
