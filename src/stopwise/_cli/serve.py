"""``stopwise serve DB``: a local web page over a SQLite log. The runs, one run's view (the report's page), and
the pending approvals, which a person approves, rejects, modifies or terminates from the page.

Safety, since the page can make tools run:

- It listens on loopback (127.0.0.1) unless ``--host`` says otherwise, and answers only requests whose ``Host``
  header names the address it listens on (a page elsewhere cannot reach it through DNS rebinding).
- Every form carries a CSRF token minted when the server starts; a POST without it, or with another, is refused
  (403) before anything is read. Decisions are POSTs only; GETs change nothing.
- Beyond loopback it also needs an access token (``--token``, or one it mints and prints): the first request
  presents it as ``?token=...``, then an HttpOnly, SameSite=Strict cookie carries it. Anything else gets 401.
- Every stored string is escaped (``html.escape``); pages load no script and nothing from elsewhere.

Settling a run continues it, so the server needs the run's agent: ``--agent FILE.py:NAME`` (repeatable), matched
to a run by the agent's name.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import secrets
import sqlite3
import sys
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from stopwise._cli._common import UsageError, existing_db, find_run
from stopwise._load import LoadError, load_agent
from stopwise._terminal import json_safe, terminal_safe
from stopwise._view.html import escape_attr, escape_text, page, render_html
from stopwise._view.timeline import RunView, run_view
from stopwise.agent import Agent
from stopwise.approvals import ApprovalDecision, ApprovalError, Approve, Modify, Reject, Terminate
from stopwise.errors import ConfigError, StopwiseError, UnreadableRun
from stopwise.result import RunStatus
from stopwise.runtime import Runner
from stopwise.store.base import RunRecord
from stopwise.store.sqlite import SQLiteStore

__all__ = ["Viewer", "serve"]

_COOKIE = "stopwise_token"
_CLIENT_TIMEOUT_S = 30.0
"""How long the server waits on a client that has connected but stopped sending (a request line, headers or a
body shorter than its Content-Length) before closing the connection."""
_SESSIONS_LISTED = 50
_RUNS_LISTED = 500


def _shown(total: int) -> str:
    if total <= _SESSIONS_LISTED:
        return f"every session ({total})"
    return f"the {_SESSIONS_LISTED} most recently written sessions of {total:,} (stopwise runs --page lists the others)"


class Viewer:
    """What the pages show and do, apart from HTTP: reads the log, renders, settles pending calls."""

    def __init__(self, db: Path, agents: Mapping[str, Agent], csrf: str) -> None:
        self.db = db
        self.agents = dict(agents)
        self.csrf = csrf

    def runs_page(self) -> str:
        runs, unreadable, total = asyncio.run(self._latest_runs())
        # A session can hold any number of runs (one per chat message): the page lists the newest _RUNS_LISTED,
        # and every run waiting for a decision among the others (up to as many again), and says what it left out.
        listed = (
            runs[:_RUNS_LISTED] + [r for r in runs[_RUNS_LISTED:] if r.status is RunStatus.SUSPENDED][:_RUNS_LISTED]
        )
        rows = []
        for r in listed:
            reason = "" if r.completion_reason is None else r.completion_reason.value
            rows.append(
                f"<tr data-run='{_a(r.run_id)}' class='{_a(r.status.value)}-row'><td><a href='/runs/{_path(r.run_id)}'>"
                f"{_e(r.run_id[:12])}</a></td><td>{_e(r.session_id)}</td><td>{_e(r.agent)}</td>"
                f"<td><span class='badge {_a(r.status.value)}'>{_e(r.status.value)}</span></td><td>{_e(reason)}</td>"
                f"<td>{r.steps}</td></tr>"
            )
        waiting = sum(1 for r in runs if r.status is RunStatus.SUSPENDED)
        body = (
            f"<h1>Runs in {_e(self.db.name)}</h1><p class='meta' id='waiting'>{waiting} waiting for a decision</p>"
            f"<p class='meta' id='shown'>{_shown(total)}</p>"
            "<table id='runs'><tr><th>run</th><th>session</th><th>agent</th><th>status</th><th>reason</th>"
            f"<th>steps</th></tr>{''.join(rows)}</table>"
        )
        if len(listed) < len(runs):
            body += (
                f"<p class='meta cut' id='runs-cut'>{len(runs) - len(listed):,} older runs of these sessions are not "
                "listed here: stopwise runs --session ID lists a session's runs</p>"
            )
        if unreadable:
            # A record a newer version wrote is named, not rendered: the page lists what it can read.
            items = "".join(
                f"<li data-run='{_a(u.run_id)}'>run {_e(u.run_id)} of session {_e(u.session_id or '')}: "
                f"{_e(u.why)}</li>"
                for u in unreadable
            )
            body += (
                f"<p class='err' id='unreadable'>{len(unreadable)} run record(s) this version of stopwise cannot "
                f"read, left out:</p><ul id='unreadable-runs'>{items}</ul>"
            )
        return page("stopwise runs", body)

    def run_page(self, ref: str, notice: str = "") -> str:
        view = asyncio.run(self._view(ref))
        nav = "<p><a href='/'>&larr; all runs</a></p>"
        if notice:
            nav += f"<p class='err' id='notice'>{_e(notice)}</p>"
        return render_html(view, nav=nav, actions=self._form(view))

    def decide(self, ref: str, form: Mapping[str, str]) -> str:
        """Settle the run's pending calls with the form's decisions and continue it; an empty string when done,
        else what was wrong (shown on the page)."""
        view = asyncio.run(self._view(ref))
        agent = self.agents.get(view.run.agent)
        if agent is None:
            return f"no agent named {view.run.agent!r}: start stopwise serve with --agent FILE.py:NAME"
        decisions: dict[str, ApprovalDecision] = {}
        message = form.get("message", "").strip()
        for p in view.pending:
            choice = form.get(f"decision:{p.call_id}", "")
            if choice == "approve":
                decisions[p.call_id] = Approve(args_hash=p.args_hash)
            elif choice == "reject":
                decisions[p.call_id] = Reject(message) if message else Reject()
            elif choice == "terminate":
                decisions[p.call_id] = Terminate(message) if message else Terminate()
            elif choice == "modify":
                try:
                    args = json.loads(form.get(f"args:{p.call_id}", ""))
                except ValueError as exc:
                    return f"{p.call_id}: the arguments are not JSON ({exc})"
                if not isinstance(args, dict):
                    return f"{p.call_id}: the arguments must be a JSON object"
                decisions[p.call_id] = Modify(args)
            else:
                return f"{p.call_id}: choose approve, reject, modify or terminate"
        try:
            asyncio.run(self._resume(agent, view.run.session_id, decisions))
        except (ApprovalError, StopwiseError) as exc:
            return str(exc)
        return ""

    def _form(self, view: RunView) -> str:
        if not view.pending:
            return ""
        if view.run.agent not in self.agents:
            return (
                f"<p class='meta' id='no-agent'>To settle this run from here, start stopwise serve with "
                f"--agent FILE.py:NAME for the agent {_e(view.run.agent)}.</p>"
            )
        fields = []
        for p in view.pending:
            name = _a(p.call_id)  # exact in the field names: the form submits the call id the run waits on
            options = "".join(
                f"<label><input type='radio' name='decision:{name}' value='{v}'{' checked' if v == 'approve' else ''}>"
                f" {v}</label> "
                for v in ("approve", "reject", "modify", "terminate")
            )
            # The arguments to edit: a textarea shows its text raw (no markup inside it), so every control, bidi
            # or invisible character is a JSON \u escape there, which parses back to the same arguments.
            args = json_safe(json.dumps(dict(p.args), ensure_ascii=False))
            fields.append(
                f"<fieldset data-call='{name}'><legend>{_e(p.tool)} <code>{_e(p.call_id)}</code></legend>{options}"
                f"<br><label>arguments for modify<br><textarea name='args:{name}' rows='3' cols='60'>"
                f"{_a(args)}</textarea></label></fieldset>"
            )
        return (
            f"<form method='post' action='/runs/{_path(view.run.run_id)}/decide' id='decide'>"
            f"<input type='hidden' name='csrf' value='{_a(self.csrf)}'>{''.join(fields)}"
            "<p><label>message (reject) or reason (terminate)<br><input name='message' size='60'></label></p>"
            "<p><button type='submit'>Submit decisions and continue the run</button></p></form>"
        )

    async def _latest_runs(self) -> tuple[list[RunRecord], list[UnreadableRun], int]:
        """The readable runs of the most recently written sessions (at most ``_SESSIONS_LISTED``), the run records
        among them this version cannot read, and how many sessions there are in all, so the page says what it
        leaves out."""
        store = SQLiteStore(self.db)
        unreadable: list[UnreadableRun] = []
        try:
            sessions = await store.list_sessions(_SESSIONS_LISTED)
            runs = [r for s in sessions for r in reversed(await store.list_runs(s, on_unreadable=unreadable.append))]
            return runs, unreadable, await store.count_sessions()
        finally:
            await store.close()

    async def _view(self, ref: str) -> RunView:
        store = SQLiteStore(self.db)
        try:
            snapshot, run = await find_run(store, ref)
            return run_view(snapshot, run)
        finally:
            await store.close()

    async def _resume(self, agent: Agent, session: str, decisions: Mapping[str, ApprovalDecision]) -> None:
        async with Runner(SQLiteStore(self.db)) as runner:
            await runner.resume(agent, session, decisions)


def _handler(viewer: Viewer, hosts: frozenset[str] | None, token: str | None) -> type[BaseHTTPRequestHandler]:
    """The request handler. ``hosts``: the Host headers accepted (None: any, when a token guards the server)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "stopwise"
        sys_version = ""
        timeout = _CLIENT_TIMEOUT_S  # a client that stops sending is let go, not waited on by a thread forever

        def do_GET(self) -> None:
            self._guarded(self._get)

        def do_POST(self) -> None:
            self._guarded(self._post)

        def _guarded(self, handle: Callable[[], None]) -> None:
            """Run ``handle``; a log that cannot be read now (removed, damaged, written by a newer version) is a
            500 naming the problem, and one line on the server's stderr, never a traceback."""
            try:
                handle()
            except ConnectionError:  # the client went away mid-answer: nobody to tell
                self.close_connection = True
            except (StopwiseError, sqlite3.Error, OSError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                print(f"stopwise serve: error: {terminal_safe(problem)}", file=sys.stderr, flush=True)
                self._plain(HTTPStatus.INTERNAL_SERVER_ERROR, f"cannot read the log: {problem}")

        def _get(self) -> None:
            url = urlsplit(self.path)
            if not self._allowed(url.query):
                return
            parts = url.path.split("/")
            if url.path == "/":
                self._html(viewer.runs_page())
            elif len(parts) == 3 and parts[1] == "runs" and parts[2]:
                self._run_page(unquote(parts[2]))
            else:
                self._plain(HTTPStatus.NOT_FOUND, "not found")

        def _post(self) -> None:
            url = urlsplit(self.path)
            if not self._allowed(""):
                return
            origin = self.headers.get("Origin")
            if hosts is not None and origin is not None and urlsplit(origin).netloc not in hosts:
                # A browser names the page a form came from: one on another site is refused before the CSRF
                # token is even looked at.
                self._plain(HTTPStatus.FORBIDDEN, "a decision from a page of another origin")
                return
            parts = url.path.split("/")
            if len(parts) != 4 or parts[1] != "runs" or not parts[2] or parts[3] != "decide":
                self._plain(HTTPStatus.NOT_FOUND, "not found")
                return
            length = _content_length(self.headers.get("Content-Length"))
            if length is None:
                self._plain(HTTPStatus.BAD_REQUEST, "Content-Length must be a whole number of bytes")
                return
            if length > 1_000_000:
                self._plain(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too large")
                return
            try:
                body = self.rfile.read(length)
            except TimeoutError:  # a body shorter than its Content-Length: nothing to answer, nobody waiting
                self.close_connection = True
                return
            form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
            if not _same(form.get("csrf", ""), viewer.csrf):
                self._plain(HTTPStatus.FORBIDDEN, "missing or wrong CSRF token")
                return
            ref = unquote(parts[2])
            try:
                problem = viewer.decide(ref, form)
            except UsageError as exc:
                self._plain(HTTPStatus.NOT_FOUND, str(exc))
                return
            if problem:
                self._run_page(ref, problem, HTTPStatus.CONFLICT)
                return
            self.send_response(HTTPStatus.SEE_OTHER)
            self.send_header("Location", f"/runs/{_path(ref)}")
            self.end_headers()

        def _run_page(self, ref: str, notice: str = "", status: HTTPStatus = HTTPStatus.OK) -> None:
            try:
                self._html(viewer.run_page(ref, notice), status)
            except UsageError as exc:
                self._plain(HTTPStatus.NOT_FOUND, str(exc))

        def _allowed(self, query: str) -> bool:
            if hosts is not None and self.headers.get("Host", "") not in hosts:
                self._plain(HTTPStatus.MISDIRECTED_REQUEST, "unexpected Host header")
                return False
            if token is None:
                return True
            given = parse_qs(query).get("token", [""])[-1]
            cookie = SimpleCookie(self.headers.get("Cookie", ""))
            held = cookie[_COOKIE].value if _COOKIE in cookie else ""
            if _same(given, token) or _same(held, token):
                self._set_cookie = given == token
                return True
            self._plain(HTTPStatus.UNAUTHORIZED, "access token required: open the URL stopwise serve printed")
            return False

        _set_cookie = False

        def _html(self, body: str, status: HTTPStatus = HTTPStatus.OK) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            # Not "no-referrer": under it a browser sends "Origin: null" with the page's own form, which the Origin
            # check cannot tell from a sandboxed page elsewhere. "same-origin" still sends nothing (no ?token=) to
            # another site.
            self.send_header("Referrer-Policy", "same-origin")
            self.send_header("Cache-Control", "no-store")
            if self._set_cookie and token is not None:
                self.send_header("Set-Cookie", f"{_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
            self.end_headers()
            self.wfile.write(data)

        def _plain(self, status: HTTPStatus, text: str) -> None:
            data = (text + "\n").encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            # A 404 repeats the run id asked for: no browser may read it as a page.
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the terminal shows the URL and warnings, not a line per request

    return Handler


def serve(db: str, host: str, port: int, targets: list[str], token: str | None) -> int:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: not a TCP port (0 to 65535; 0 picks a free one)")
    path = existing_db(db, positional=True)
    _check_readable(path)
    agents: dict[str, Agent] = {}
    for target in targets:
        try:
            agent = load_agent(target)
        except (LoadError, ConfigError) as exc:
            raise UsageError(str(exc)) from None
        agents[agent.name] = agent
    loopback = _is_loopback(host)
    if not loopback and token is None:
        token = secrets.token_urlsafe(24)
    viewer = Viewer(path, agents, secrets.token_urlsafe(32))
    # Bound first: the port (0 picks a free one) is part of the Host names the handler accepts.
    server = ThreadingHTTPServer((host, port), BaseHTTPRequestHandler)
    bound_port = server.server_address[1]
    # On loopback, the Host check keeps a page on another site from reaching the server by DNS rebinding; beyond
    # it, clients name the machine in ways the server cannot list, and the access token does that job.
    hosts = frozenset(f"{h}:{bound_port}" for h in (host, "localhost", "127.0.0.1")) if loopback else None
    server.RequestHandlerClass = _handler(viewer, hosts, token)
    url = f"http://{host}:{bound_port}/"
    if token is not None:
        url += f"?token={quote(token)}"
    if not loopback:
        print(
            f"stopwise serve: warning: listening on {host}, beyond this machine; anyone with the URL (its token) "
            "can approve tool calls",
            file=sys.stderr,
        )
    print(f"stopwise serve: {url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_e, _a = escape_text, escape_attr


def _path(ref: str) -> str:
    """A run id as one URL path segment: every character but letters, digits and ``_.-~`` percent-encoded (a
    ``/`` included), so ``unquote`` of the segment gives the id back."""
    return quote(ref, safe="")


def _same(given: str, expected: str) -> bool:
    """A constant-time comparison of a presented token with the expected one, whatever characters it holds
    (``hmac.compare_digest`` refuses non-ASCII strings; their UTF-8 bytes it takes)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def _content_length(header: str | None) -> int | None:
    """A request body's length: 0 when the header is missing, None when it is not a whole number of bytes."""
    if header is None:
        return 0
    text = header.strip()
    return int(text) if text.isdigit() and text.isascii() else None


def _check_readable(path: Path) -> None:
    """Open the log once before listening, so a file that is not a stopwise database (or one a newer version
    wrote) is refused at start, exit code 2, not on every page."""
    asyncio.run(SQLiteStore(path).close())  # a StoreError naming the problem when it cannot be opened
