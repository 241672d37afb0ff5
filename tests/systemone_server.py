"""A System One API on loopback, for the ``SystemOneEvaluator`` tests and benchmark.

``POST /v1/systemone`` (and OpenRouter's ``/api/alpha/decisions``) with a Bearer key. With nothing queued the
server answers like the real API: it validates the body (422 with a list ``detail`` of ``{loc, msg}`` when it is
wrong) and answers every question, with the answer set in ``answers[name]`` or a uniform one. Tests queue
``Canned`` answers to script anything else (an error status, headers, a malformed body, a held answer), and
read ``requests`` to assert what the client sent. It runs ``http.server`` in a thread on 127.0.0.1 with a
free port, speaking HTTP/1.1 so that a client can keep its connection.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = ("/v1/systemone", "/api/alpha/decisions")


@dataclass(frozen=True)
class Canned:
    """One scripted HTTP answer. ``body`` is JSON data, or bytes sent as they are."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None
    """If given, the answer waits until the event is set (to make a client time out); ``stop`` sets it."""


@dataclass(frozen=True)
class Received:
    """One request the server got."""

    path: str
    headers: Mapping[str, str]
    """Lower-cased names."""
    body: Any
    """Decoded JSON, or the raw bytes when it was not JSON."""
    client_port: int
    """The client's port: two requests with the same port came over one connection."""


def noul(p: float) -> dict[str, Any]:
    """A noul answer: the probability of yes."""
    return {"type": "noul", "noul": p}


def choice(probabilities: Mapping[str, float]) -> dict[str, Any]:
    """A choice answer: the most likely label, its probability as confidence, and the distribution."""
    best = max(probabilities, key=lambda label: probabilities[label])
    return {"type": "choice", "choice": best, "confidence": probabilities[best], "probabilities": dict(probabilities)}


def score(probabilities: Sequence[float]) -> dict[str, Any]:
    """A score answer over levels 0..n-1: the expected level, a confidence, the distribution keyed "0".."n-1"."""
    expected = sum(i * p for i, p in enumerate(probabilities))
    return {
        "type": "score",
        "score": expected,
        "confidence": max(probabilities),
        "probabilities": {str(i): p for i, p in enumerate(probabilities)},
    }


class SystemOneServer:
    """See the module docstring. ``key`` is the Bearer key it accepts (any, or none, when None); ``model`` is
    the resolved model version it reports."""

    def __init__(self, *, key: str | None = "sk-test", model: str = "jev-1.13.0") -> None:
        self.key = key
        self.model = model
        self.queue: list[Canned] = []
        self.answers: dict[str, Any] = {}
        """Per question name, the answer the server gives when nothing is queued."""
        self.requests: list[Received] = []
        self._holds: list[threading.Event] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        # A short poll interval so that stop() returns at once rather than after the default half second.
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *answers: Canned) -> None:
        with self._lock:
            self.queue.extend(answers)
            self._holds.extend(a.hold for a in answers if a.hold is not None)

    def start(self) -> SystemOneServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        for hold in self._holds:  # release held answers, or their threads would wait forever
            hold.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def respond(self, received: Received) -> Canned:
        with self._lock:
            self.requests.append(received)
            if received.path not in PATHS:
                return Canned(404, {"detail": "Not Found"})
            if self.key is not None and received.headers.get("authorization") != f"Bearer {self.key}":
                return Canned(401, {"detail": "Invalid API key"})
            if self.queue:
                return self.queue.pop(0)
            answers = dict(self.answers)
        return self._answer(received.body, answers)

    def _answer(self, body: Any, scripted: Mapping[str, Any]) -> Canned:
        errors = validate(body)
        if errors:
            return Canned(422, {"detail": errors})
        out: dict[str, Any] = {}
        for name, question in body["questions"].items():
            if name in scripted:
                out[name] = scripted[name]
            elif question["type"] == "noul":
                out[name] = noul(0.5)
            elif question["type"] == "choice":
                labels = list(question["criteria"])
                out[name] = choice({label: 1 / len(labels) for label in labels})
            else:
                out[name] = score([1 / len(question["criteria"])] * len(question["criteria"]))
        return Canned(200, {"model": self.model, "answers": out, "usage": {"input_tokens": 100, "output_tokens": 0}})


def validate(body: Any) -> list[dict[str, Any]]:
    """The wire format's rules, as a 422 ``detail`` list (empty when the body is valid)."""
    errors: list[dict[str, Any]] = []

    def error(loc: Sequence[Any], msg: str) -> None:
        errors.append({"loc": ["body", *loc], "msg": msg, "type": "value_error"})

    if not isinstance(body, dict):
        error([], "the body must be a JSON object")
        return errors
    if not isinstance(body.get("model"), str) or not body["model"]:
        error(["model"], "field required")
    if not isinstance(body.get("state"), (str, dict, list)):
        error(["state"], "field required")
    questions = body.get("questions")
    if not isinstance(questions, dict) or not questions:
        error(["questions"], "at least one question is required")
        return errors
    for name, q in questions.items():
        where = ["questions", name]
        if not isinstance(q, dict) or q.get("type") not in ("noul", "choice", "score"):
            error([*where, "type"], "must be 'noul', 'choice' or 'score'")
            continue
        if not isinstance(q.get("instructions"), str) or not q["instructions"].strip():
            error([*where, "instructions"], "field required")
        criteria = q.get("criteria")
        if q["type"] == "noul":
            if criteria is not None and (
                not isinstance(criteria, dict)
                or not set(criteria) <= {"true", "false"}
                or not all(isinstance(v, str) for v in criteria.values())
            ):
                error([*where, "criteria"], "must be an object with 'true' and/or 'false' descriptions")
        elif q["type"] == "choice":
            if not isinstance(criteria, dict) or not 2 <= len(criteria) <= 255:
                error([*where, "criteria"], "must map 2 to 255 labels to descriptions")
            elif not all(isinstance(v, str) and v for v in criteria.values()):
                error([*where, "criteria"], "every description must be a non-empty string")
        elif not isinstance(criteria, list) or not 2 <= len(criteria) <= 10:
            error([*where, "criteria"], "must list 2 to 10 levels")
    return errors


def _handler(server: SystemOneServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client may reuse its connection
        # Headers and body go out as separate small writes; with Nagle on, the body waits for the client's
        # delayed ACK (about 40 ms a request).
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = server.respond(Received(self.path, headers, body, self.client_address[1]))
            if answer.hold is not None:
                answer.hold.wait()
            data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
            try:
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (a timeout test) and closed the connection
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    return Handler
