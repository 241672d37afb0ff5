"""A real HTTP server on loopback that answers like a model provider, for the adapter tests.

Tests queue canned answers (status, headers, a JSON body, raw bytes or server-sent events); the server answers
each POST with the next one, or with ``always`` once the queue is empty, and records every request it got. It
runs ``http.server`` in a thread on 127.0.0.1 with a free port; the SDKs are pointed at it with ``base_url``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    """One canned HTTP answer. ``body`` is JSON data, or raw bytes sent as they are; ``events`` makes it an SSE
    stream of ``(event name or None, JSON data or raw string)`` pairs."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    events: Sequence[tuple[str | None, Any]] | None = None
    hold: threading.Event | None = None
    """If given, the answer waits until the test sets it (to make a client time out); set it before ``stop``."""


@dataclass(frozen=True)
class Received:
    """One request the server got."""

    path: str
    headers: Mapping[str, str]
    body: Any


class ProviderServer:
    """Answers POSTs with queued ``Answer`` values; see the module docstring."""

    def __init__(self) -> None:
        self.queue: list[Answer] = []
        self.always: Answer | None = None
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []
        """Exceptions raised while answering (a client that hung up before its answer was written, say)."""
        self._http = _Server(("127.0.0.1", 0), _handler(self))
        self._http.errors = self.errors
        # A short poll interval so that stop() returns at once rather than after the default half second.
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, *answers: Answer) -> None:
        with self._lock:
            self.queue.extend(answers)

    def next_answer(self, received: Received) -> Answer:
        with self._lock:
            self.requests.append(received)
            if self.queue:
                return self.queue.pop(0)
            if self.always is not None:
                return self.always
        return Answer(599, {"error": "the test server has no answer queued"})

    def start(self) -> ProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


class _Server(ThreadingHTTPServer):
    errors: list[BaseException]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Kept for the test to inspect rather than printed: a client that timed out has hung up by design.
        self.errors.append(sys.exc_info()[1] or RuntimeError("unknown error"))


def _handler(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            answer = server.next_answer(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if answer.hold is not None:
                answer.hold.wait()
            if answer.events is not None:
                self._send_events(answer)
            else:
                self._send_body(answer)

        def _send_body(self, answer: Answer) -> None:
            data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
            self.send_response(answer.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_events(self, answer: Answer) -> None:
            self.send_response(answer.status)
            self.send_header("content-type", "text/event-stream")
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
            for event, data in answer.events or ():
                text = data if isinstance(data, str) else json.dumps(data)
                prefix = f"event: {event}\n" if event else ""
                self.wfile.write(f"{prefix}data: {text}\n\n".encode())
                self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    return Handler


def serve() -> Iterator[ProviderServer]:
    """Generator for a pytest fixture: a started server, stopped afterwards."""
    server = ProviderServer().start()
    try:
        yield server
    finally:
        server.stop()


def anthropic_message(
    *content: dict[str, Any], stop: str | None = "end_turn", output: int = 6, cache_read: int = 0
) -> dict[str, Any]:
    """An Anthropic Messages API body: ``content`` blocks, 20 input tokens (plus ``cache_read`` read from the
    cache, when given) and ``output`` output tokens."""
    usage: dict[str, Any] = {"input_tokens": 20, "output_tokens": output}
    if cache_read:
        usage["cache_read_input_tokens"] = cache_read
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def chat_completion(
    content: str | None,
    *,
    finish: str = "stop",
    refusal: str | None = None,
    logprobs: list[dict[str, Any]] | None = None,
    model: str = "gpt-judge",
) -> dict[str, Any]:
    """An OpenAI chat completion body with one choice: ``content`` (and ``refusal``) as the assistant's message,
    ``logprobs`` as its per-token log-probabilities when given."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
                "logprobs": None if logprobs is None else {"content": logprobs},
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
    }
