"""The command line, ``stopwise serve`` and the HTML report under hostile input: what they print or draw comes
from tool results, model replies, goals and ids an attacker may write (an injected web page is a tool result).

One run is recorded for the whole module by a real agent on a real SQLite file: its model writes escape
sequences (colour, clear screen, an OSC 52 clipboard write, an OSC 8 link, a window title), carriage returns,
backspaces, bidi overrides, invisible characters and Unicode tag characters into its reply, its tool calls' ids,
arguments and tool names, and its tools return a hostile web page; its goal and a session id of its own carry the
same. Each test names the attack and what must hold.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from _cli_fixtures import stopwise_cmd
from stopwise import Agent, FunctionModel, Goal, Reply, Role, Runner, SQLiteStore, ToolCall, tool
from stopwise._cli.serve import Viewer, _handler
from stopwise._load import MAX_AGENT_FILE_BYTES
from stopwise._terminal import json_safe, terminal_safe
from stopwise.cli import main

ESCAPES = (
    "\x1b[31mred\x1b[0m \x1b[2J\x1b[H \x1b]0;pwned\x07 \x1b]52;c;cm0gLXJmIH4=\x07 "
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x9b31m"
)
"""Colour, clear screen and cursor home, a window title, an OSC 52 clipboard write, an OSC 8 link, an 8-bit CSI."""
FORGERY = "ok\rstatus: completed\x08\x08\x7f"
"""A carriage return and backspaces that would overwrite what the line said."""
HIDDEN = "\u202eexe.txt\u202c \u2066iso\u2069 \u200fmark\u200e a\u200bb \ufeff\U000e0049\U000e0047\U000e004e"
"""A right-to-left override, an isolate, bidi marks, a zero-width space, a BOM and tag characters (hidden text)."""
MARKUP = "<script>alert(1)</script>'\"><svg onload=alert(1)></textarea><a href='javascript:alert(1)'>x</a>"
LETTERS = "Zoë 東京"
"""Text that must print as it is (on a stream that can encode it)."""
HOSTILE = f"{ESCAPES} {FORGERY} {HIDDEN} {MARKUP} {LETTERS}"
SESSION = "chat 1/2 \x1b[31m\u202e"
"""A session id a caller chose: a space, a slash, an escape sequence and a bidi override."""


def unsafe_for_a_terminal(ch: str) -> bool:
    """A character a terminal acts on or that hides or reorders text: a control (C0 but the newline, C1, DEL),
    a lone surrogate, a bidi control, or a format character that draws nothing (the joiners and the format
    characters of particular scripts aside)."""
    code = ord(ch)
    if ch == "\n":
        return False
    category = unicodedata.category(ch)
    if category in ("Cc", "Cs", "Zl", "Zp"):
        return True
    return category == "Cf" and not _script_format(code)


def _script_format(code: int) -> bool:
    """The format characters that are part of writing a script (joiners, prepended concatenation marks, Egyptian
    hieroglyph controls): shown as they are."""
    return (
        code in (0x200C, 0x200D, 0x06DD, 0x070F, 0x08E2, 0x110BD, 0x110CD)
        or 0x0600 <= code <= 0x0605
        or 0x0890 <= code <= 0x0891
        or 0x13430 <= code <= 0x1343F
    )


def raw_unsafe(text: str) -> list[str]:
    return sorted({f"U+{ord(ch):04X}" for ch in text if unsafe_for_a_terminal(ch)})


# --- the recorded run ---------------------------------------------------------------------------------------


@tool(needs_approval=True)
def fetch(url: str) -> str:
    """Fetch a web page.

    Args:
        url: Where.
    """
    return f"<html>{HOSTILE}</html>"


@tool
def read(url: str) -> str:
    """Read a web page.

    Args:
        url: Where.
    """
    return f"<html>{HOSTILE}</html>"


def _model(request: Any) -> Reply | str:
    seen = sum(1 for m in request.messages if m.role is Role.TOOL)
    if not seen:
        return Reply(
            text=f"thinking {HOSTILE}",
            tool_calls=(
                ToolCall("read", {"url": HOSTILE}, id=f"c1{ESCAPES}"),
                ToolCall(f"no_such{ESCAPES}{HIDDEN}", {"x": HOSTILE}, id=f"c2{HIDDEN}"),
            ),
        )
    if seen == 2:
        return Reply(text=HOSTILE, tool_calls=(ToolCall("fetch", {"url": HOSTILE}, id=f"c3{HIDDEN}"),))
    return f"done {HOSTILE}"


AGENT = Agent(name="hostile", model=FunctionModel(_model), tools=(fetch, read))


@dataclass(frozen=True)
class Recorded:
    db: Path
    session: str
    """The suspended run's session (its last run is the hostile one)."""
    run_id: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    db = tmp_path_factory.mktemp("hostile") / "log.db"

    async def go() -> Recorded:
        async with Runner(SQLiteStore(db)) as runner:
            result = await runner.run(
                AGENT, f"prompt {ESCAPES}", session_id=SESSION, goal=Goal(f"goal {HOSTILE}", [f"done {HIDDEN}"])
            )
        assert result.status.value == "suspended"
        return Recorded(db, result.session_id, result.run_id)

    return asyncio.run(go())


def copy_of(recorded: Recorded, path: Path) -> Path:
    """A copy of the recorded log at ``path``, for a test that damages it."""
    with sqlite3.connect(recorded.db) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- terminal injection -------------------------------------------------------------------------------------


def test_terminal_safe_escapes_every_control_bidi_invisible_and_tag_character_of_unicode() -> None:
    every = [chr(c) for c in range(0x110000) if unsafe_for_a_terminal(chr(c)) or chr(c) == "\n"]
    left = [f"U+{ord(ch):04X}" for ch in every if terminal_safe(ch) == ch]
    assert not left, f"printed raw: {left[:20]}"
    assert all(terminal_safe(ch).isascii() and terminal_safe(ch).startswith("\\") for ch in every)


def test_terminal_safe_keeps_letters_emoji_and_the_joiners_inside_them() -> None:
    kept = "Zoë 東京 مرحبا 👩‍👩‍👧 क्‍ष"
    assert terminal_safe(kept) == kept


def test_terminal_safe_writes_a_lone_surrogate_as_an_escape_so_printing_it_cannot_fail() -> None:
    assert terminal_safe("a\ud800b") == "a\\ud800b"
    terminal_safe("\udfff").encode("utf-8")  # no UnicodeEncodeError


def test_json_safe_escapes_what_a_terminal_acts_on_and_parses_back_to_the_same_value() -> None:
    value = {"k": HOSTILE + "\ud800 Zoë 👩‍👩‍👧", "n": [1, "\\u202e literal"]}
    document = json_safe(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(document) == value
    assert not raw_unsafe(document)
    assert "\n  " in document and "Zoë" in document  # the layout and readable text stay


def test_show_prints_no_raw_escape_bidi_or_invisible_character_from_the_log(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "show", recorded.run_id, "--db", str(recorded.db), "--full")
    assert code == 0
    assert not raw_unsafe(out)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in out and "\\u202eexe.txt" in out and "\\U000e0049" in out
    assert LETTERS in out
    # A carriage return cannot rewrite the line: every stored value stays on its own line.
    assert not any(line.startswith("status: completed") for line in out.splitlines())


def test_show_json_prints_no_raw_bidi_or_invisible_character_and_parses_to_the_stored_text(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "show", recorded.run_id, "--db", str(recorded.db), "--json")
    assert code == 0
    assert not raw_unsafe(out)
    data = json.loads(out)
    assert data["session_id"] == SESSION
    assert data["goal"]["text"] == f"goal {HOSTILE}"
    assert f"thinking {HOSTILE}" in [step["text"] for step in data["steps"]]


def test_runs_run_and_the_pending_lines_print_hostile_ids_escaped(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "runs", "--db", str(recorded.db), "--session", SESSION)
    assert code == 0 and not raw_unsafe(out)
    assert len(out.splitlines()) == 3, "one row: a stored value cannot start another"
    code, out, _ = cli(capsys, "show", recorded.session, "--db", str(recorded.db))
    pending = [line for line in out.splitlines() if line.startswith("pending ")]
    assert len(pending) == 1 and "c3\\u202eexe.txt" in pending[0] and not raw_unsafe(out)


def test_runs_prints_a_huge_session_id_on_its_own_row_without_padding_every_row_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    huge = "s" * 100_000

    async def go() -> None:
        async with Runner(SQLiteStore(db)) as runner:
            agent = Agent(name="a", model=FunctionModel(lambda request: "hi"))
            for session in [huge, *(f"chat-{i}" for i in range(20))]:
                await runner.run(agent, "hi", session_id=session)

    asyncio.run(go())
    code, out, _ = cli(capsys, "runs", "--db", str(db), "--limit", "50")
    assert code == 0
    rows = out.splitlines()[2:]
    assert len(rows) == 21 and sum(huge in row for row in rows) == 1
    assert len(out) < 110_000, "the other rows are not padded to the huge id"


def test_a_notice_naming_an_unreadable_session_is_escaped(
    tmp_path: Path, recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "damaged.db"
    copy_of(recorded, db)
    with sqlite3.connect(db) as conn:
        conn.execute('UPDATE log SET messages = \'[{"role": "assistant", "content": "torn\' WHERE seq = 1')
    _, _, err = cli(capsys, "replay", str(db))
    assert "the session is skipped" in err
    assert not raw_unsafe(err)


def test_show_says_it_cut_a_long_tool_result_and_how_long_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = _big_result_run(tmp_path, 2_000_000)
    code, out, _ = cli(capsys, "show", run_id, "--db", str(db))
    assert code == 0
    assert "[cut: 2,000,000 characters; --full prints all]" in out
    assert len(out) < 5_000


@pytest.mark.slow  # a process of its own
def test_a_command_writing_to_an_ascii_only_stream_escapes_what_it_cannot_encode_instead_of_a_traceback(
    recorded: Recorded, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stopwise", "show", recorded.run_id, "--db", str(recorded.db), "--full"],
        capture_output=True,
        text=True,
        encoding="ascii",
        errors="replace",
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Zo\\xeb \\u6771\\u4eac" in done.stdout


def test_eval_tables_print_a_traces_source_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    devset = Path(__file__).resolve().parents[1] / "evals" / "data" / "devset.jsonl"
    record = json.loads(devset.read_text(encoding="utf-8").splitlines()[0])
    traces = tmp_path / "t.jsonl"
    rows = [{**record, "id": f"r{i}", "source": f"src{ESCAPES}{HIDDEN}", "label": i % 2 == 0} for i in range(4)]
    traces.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, out, err = cli(capsys, "eval", str(traces), "--errors")
    assert code == 0, err
    assert "src\\x1b[31mred" in out
    assert not raw_unsafe(out + err)


# --- HTML injection -----------------------------------------------------------------------------------------


class _Page(HTMLParser):
    """What a browser would run or show: script elements, event handlers, script URLs, and the visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "iframe", "object", "embed", "img", "base", "link"):
            self.scripts.append(tag)
        for key, value in attrs:
            if key.startswith("on") or (key in ("href", "src", "action") and value and "javascript:" in value):
                self.scripts.append(f"{tag}[{key}]")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    return parsed


def test_the_report_runs_nothing_from_the_log_and_shows_it_as_text(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code, _, _ = cli(capsys, "report", recorded.run_id, "--db", str(recorded.db), "-o", str(out))
    assert code == 0
    page = parse(out.read_text(encoding="utf-8"))
    assert page.scripts == []
    shown = "".join(page.text)
    assert MARKUP in shown, "the markup is shown as the text it is"


def test_the_report_title_and_plot_labels_escape_controls_as_text_where_no_markup_can_mark_them() -> None:
    from stopwise._view.html import _flat

    assert _flat("drift\u202e<b>") == "drift\\u202e&lt;b&gt;"


def test_the_report_shows_controls_bidi_and_invisible_characters_as_marked_escapes(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    cli(capsys, "report", recorded.run_id, "--db", str(recorded.db), "-o", str(out))
    page = out.read_text(encoding="utf-8")
    assert not raw_unsafe("".join(parse(page).text))
    assert "<span class='ctl'>\\u202e</span>exe.txt" in page
    assert "<span class='ctl'>\\U000e0049</span>" in page


def test_the_report_of_a_10_mb_tool_result_is_kilobytes_and_says_what_it_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id = _big_result_run(tmp_path, 10_000_000)
    out = tmp_path / "r.html"
    code, _, _ = cli(capsys, "report", run_id, "--db", str(db), "-o", str(out))
    assert code == 0
    page = out.read_text(encoding="utf-8")
    assert len(page) < 200_000
    assert "[cut: 10,000,000 characters; stopwise show RUN --json prints all]" in page


def test_the_report_of_a_run_of_thousands_of_steps_draws_the_first_and_last_and_names_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stopwise._view import html as html_view

    db = tmp_path / "long.db"
    steps = 60
    run_id = _long_run(db, steps)
    out = tmp_path / "r.html"
    monkeypatch.setattr(html_view, "_STEPS_SHOWN", 20)  # the rule, on a run the test can make in a second
    cli(capsys, "report", run_id, "--db", str(db), "-o", str(out))
    page = out.read_text(encoding="utf-8")
    drawn = [int(n) for n in re.findall(r"<div class='step \w+' data-step='(\d+)'", page)]
    assert drawn == [*range(1, 11), *range(steps - 9, steps + 1)]
    assert f"40 steps not shown here (steps 11 to {steps - 10}); stopwise show RUN prints every step" in page


def test_a_guardian_plot_of_thousands_of_decisions_thins_its_markers_keeps_the_notable_ones_and_says_so() -> None:
    from stopwise._view.html import _plot
    from stopwise._view.timeline import ConditionPoint, ConditionSeries

    points = tuple(
        ConditionPoint(
            i // 2 + 1, "turn" if i % 2 else "pre_execution", (i % 100) / 100, outcome, outcome != "continue"
        )
        for i in range(5_000)
        for outcome in ["escalate" if i % 97 == 0 else "continue"]
    )
    svg = _plot(ConditionSeries("drift", 0.5, 0.1, points))
    markers = re.findall(r"<circle class='marker' data-step='(\d+)' data-outcome='(\w+)'", svg)
    assert 500 < len(markers) <= 1_000
    escalated = {str(p.step) for p in points if p.escalated}
    assert escalated <= {step for step, outcome in markers if outcome == "escalate"}
    assert f"markers: {len(markers):,} of 5,000 decisions" in svg
    assert len(re.findall(r"text-anchor='middle'>\d+</text>", svg)) <= 12  # step labels a reader can tell apart
    assert len(svg) < 300_000


def _big_result_run(tmp_path: Path, size: int) -> tuple[Path, str]:
    @tool
    def download(url: str) -> str:
        """Download.

        Args:
            url: Where.
        """
        return "x" * size

    def model(request: Any) -> Reply | str:
        if any(m.role is Role.TOOL for m in request.messages):
            return "downloaded"
        return Reply(tool_calls=(ToolCall("download", {"url": "https://example.org"}),))

    db = tmp_path / "big.db"

    async def go() -> str:
        async with Runner(SQLiteStore(db)) as runner:
            agent = Agent(name="downloader", model=FunctionModel(model), tools=(download,))
            return (await runner.run(agent, "go")).run_id

    return db, asyncio.run(go())


def _long_run(db: Path, steps: int) -> str:
    @tool
    def page(n: int) -> str:
        """Read a page.

        Args:
            n: The page.
        """
        return f"page {n}"

    def model(request: Any) -> Reply | str:
        seen = sum(1 for m in request.messages if m.role is Role.TOOL)
        return "read" if seen >= steps - 1 else Reply(tool_calls=(ToolCall("page", {"n": seen + 1}),))

    async def go() -> str:
        async with Runner(SQLiteStore(db)) as runner:
            agent = Agent(name="pager", model=FunctionModel(model), tools=(page,), max_steps=steps + 1)
            return (await runner.run(agent, "go")).run_id

    return asyncio.run(go())


# --- stopwise serve's HTTP surface --------------------------------------------------------------------------


@contextmanager
def serving(viewer: Viewer, token: str | None = None, *, host_check: bool = False) -> Iterator[str]:
    """``stopwise serve``'s handler in a real HTTP server on a free loopback port; its base URL. ``host_check``:
    the Host names loopback accepts, as ``serve`` sets them."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(viewer, None, token))
    port = server.server_address[1]
    if host_check:
        server.RequestHandlerClass = _handler(viewer, frozenset({f"127.0.0.1:{port}", f"localhost:{port}"}), token)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass(frozen=True)
class Served:
    base: str
    csrf: str
    host: str


@pytest.fixture
def served(recorded: Recorded) -> Iterator[Served]:
    """``stopwise serve``'s handler on loopback, in a real HTTP server on a free port."""
    viewer = Viewer(recorded.db, {AGENT.name: AGENT}, "the-csrf-token")
    with serving(viewer, host_check=True) as base:
        yield Served(base, viewer.csrf, base.removeprefix("http://"))


def http(
    url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None, method: str | None = None
) -> tuple[int, str, Any]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


def test_serve_answers_a_non_ascii_csrf_token_with_403_not_a_dropped_connection(
    served: Served, recorded: Recorded
) -> None:
    ref = urllib.request.quote(recorded.run_id)
    status, body, _ = http(f"{served.base}/runs/{ref}/decide", data=b"csrf=%C3%A9t%C3%A9")
    assert (status, body) == (403, "missing or wrong CSRF token\n")


def test_serve_beyond_loopback_answers_a_non_ascii_access_token_with_401(recorded: Recorded) -> None:
    with serving(Viewer(recorded.db, {}, "csrf"), "the-access-token") as base:
        assert http(f"{base}/?token=%C3%A9")[0] == 401


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "٣"])
def test_serve_answers_a_content_length_that_is_not_a_byte_count_with_400(
    served: Served, recorded: Recorded, length: str
) -> None:
    import http.client

    conn = http.client.HTTPConnection(served.host, timeout=10)
    conn.putrequest("POST", f"/runs/{recorded.run_id}/decide")
    conn.putheader("Content-Length", length.encode("utf-8"))  # type: ignore[arg-type]
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 400
    assert response.read() == b"Content-Length must be a whole number of bytes\n"
    conn.close()


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1.evil.example", "null"])
def test_serve_refuses_a_decision_posted_from_a_page_of_another_origin(
    served: Served, recorded: Recorded, origin: str
) -> None:
    status, body, _ = http(
        f"{served.base}/runs/{recorded.run_id}/decide",
        data=f"csrf={served.csrf}&decision:x=approve".encode(),
        headers={"Origin": origin},
    )
    assert (status, body) == (403, "a decision from a page of another origin\n")
    with sqlite3.connect(recorded.db) as conn:  # nothing settled: the run still waits
        assert conn.execute("SELECT status FROM runs WHERE run_id = ?", (recorded.run_id,)).fetchone()[0] == (
            "suspended"
        )


def test_serve_finds_a_session_whose_id_needs_percent_encoding(served: Served, recorded: Recorded) -> None:
    status, body, headers = http(f"{served.base}/runs/{urllib.request.quote(SESSION, safe='')}")
    assert status == 200, body
    assert recorded.run_id in body
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"  # the page's own form keeps its Origin


def test_serve_decision_form_shows_the_arguments_as_json_with_controls_escaped_that_parses_back(
    served: Served, recorded: Recorded
) -> None:
    _, body, _ = http(f"{served.base}/runs/{recorded.run_id}")
    assert f"action='/runs/{recorded.run_id}/decide'" in body
    assert parse(body).scripts == []
    textarea = re.search(r"<textarea name='args:[^']*' rows='3' cols='60'>([^<]*)</textarea>", body)
    assert textarea is not None and not raw_unsafe(textarea.group(1))
    assert json.loads(html.unescape(textarea.group(1))) == {"url": HOSTILE}


def test_serve_answers_an_unknown_run_as_plain_text_that_no_browser_renders(served: Served) -> None:
    status, body, headers = http(f"{served.base}/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert status == 404
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert body == "no run or session '<script>alert(1)</script>'\n"


def test_serve_holds_against_traversal_other_methods_and_a_huge_query(served: Served) -> None:
    assert http(f"{served.base}/runs/..%2F..%2Fetc%2Fpasswd")[0] == 404
    assert http(f"{served.base}/static/../../etc/passwd")[0] == 404
    for method in ("PUT", "DELETE", "PATCH", "HEAD"):
        assert http(f"{served.base}/", method=method, data=b"" if method != "HEAD" else None)[0] == 501
    assert http(f"{served.base}/?{'a' * 70_000}")[0] == 414
    assert http(served.base + "/", headers={"Host": "evil.example"})[0] == 421  # DNS rebinding


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET / HTTP/1.1\r\n", b"POST /runs/x/decide HTTP/1.1\r\nContent-Length: 100\r\n\r\ncsrf="],
    ids=["nothing", "half a request", "a short body"],
)
def test_serve_lets_go_of_a_client_that_stops_sending(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch, sent: bytes
) -> None:
    import socket

    from stopwise._cli import serve as serve_module

    monkeypatch.setattr(serve_module, "_CLIENT_TIMEOUT_S", 0.5)  # the rule, without waiting its 30 s
    with serving(Viewer(recorded.db, {}, "csrf")) as base:
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=20) as client:
            client.sendall(sent)
            assert client.recv(1024) == b"", "the server closes the connection, answering nothing"


def test_serve_runs_page_lists_the_newest_runs_and_every_waiting_one_and_names_how_many_it_left_out(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stopwise._cli import serve as serve_module

    db = copy_of(recorded, tmp_path / "log.db")

    async def chat() -> None:  # a session of many runs after the suspended one
        async with Runner(SQLiteStore(db)) as runner:
            for _ in range(12):
                await runner.run(Agent(name="chat", model=FunctionModel(lambda request: "hi")), "hi", session_id="c")

    asyncio.run(chat())
    monkeypatch.setattr(serve_module, "_RUNS_LISTED", 5)  # the rule, on a log the test makes in a second
    with serving(Viewer(db, {}, "csrf")) as base:
        _, page, _ = http(f"{base}/")
    listed = re.findall(r"<tr data-run='(\w+)'", page)
    assert len(listed) == 6 and recorded.run_id in listed, "the waiting run is listed though older"
    assert "7 older runs of these sessions are not listed here" in page  # 13 runs, 6 listed
    assert "1 waiting for a decision" in page


def test_serve_answers_a_log_that_became_unreadable_with_500_naming_it(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    copy_of(recorded, db)
    with serving(Viewer(db, {}, "csrf")) as base:
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA user_version = 999")  # a newer stopwise migrated it meanwhile
        status, body, _ = http(f"{base}/")
        assert status == 500
        assert body.startswith("cannot read the log: SchemaTooNew: ") and "schema version 999" in body
    err = capsys.readouterr().err
    assert err.startswith("stopwise serve: error: SchemaTooNew:") and "Traceback" not in err


# --- hostile files ------------------------------------------------------------------------------------------


def test_serve_refuses_a_port_out_of_range_with_one_line_and_exit_2(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "serve", str(recorded.db), "--port", "70000")
    assert (code, err) == (2, "stopwise serve: error: --port 70000: not a TCP port (0 to 65535; 0 picks a free one)\n")


@pytest.mark.slow  # a process of its own
@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"not a database\n", "file is not a database"), (b"newer", "has schema version 999, newer than")],
    ids=["not sqlite", "newer version"],
)
def test_serve_refuses_a_file_it_cannot_read_as_a_log_at_start_with_exit_2(
    tmp_path: Path, recorded: Recorded, content: bytes, problem: str
) -> None:
    db = tmp_path / "log.db"
    if content == b"newer":
        copy_of(recorded, db)
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA user_version = 999")
    else:
        db.write_bytes(content)
    done = stopwise_cmd("serve", str(db), "--port", "0", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("stopwise serve: error: ") and done.stderr.count("\n") == 1
    assert problem in done.stderr


def test_an_agent_file_over_the_size_limit_is_refused_before_it_is_compiled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = tmp_path / "huge.py"
    with huge.open("w", encoding="utf-8") as f:
        f.write("x = 1\n" * (MAX_AGENT_FILE_BYTES // 6 + 1))
    code, out, err = cli(capsys, "run", f"{huge}:agent", "hi", "--db", str(tmp_path / "log.db"))
    assert code == 2 and out == ""
    assert err == (
        f"stopwise run: error: {huge}: {huge.stat().st_size:,} bytes, over the {MAX_AGENT_FILE_BYTES:,} an agent "
        "file may have; define the agent in a small file that imports the rest\n"
    )
    assert not (tmp_path / "log.db").exists()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.py", None, "missing.py: no such file"),
        ("folder", "dir", "folder: not a file"),
        ("syntax.py", "def f(:\n", "importing syntax.py raised SyntaxError: "),
        ("binary.py", b"\x00\xff\xfe" * 1000, "importing binary.py raised SyntaxError: "),
        ("empty.py", "", "empty.py has no attribute 'agent'"),
        ("other.py", "agent = 1\n", "other.py:agent is of type int, expected an Agent"),
        ("escapes.py", "raise ValueError('\\x1b[2J\\u202e')\n", "ValueError: \\x1b[2J\\u202e"),
    ],
)
def test_an_agent_file_that_cannot_be_loaded_is_one_escaped_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: str | bytes | None,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    if content == "dir":
        (tmp_path / name).mkdir()
    elif isinstance(content, bytes):
        (tmp_path / name).write_bytes(content)
    elif content is not None:
        (tmp_path / name).write_text(content, encoding="utf-8")
    code, out, err = cli(capsys, "run", f"{name}:agent", "hi", "--db", "log.db")
    assert code == 2 and out == ""
    assert err.startswith("stopwise run: error: ") and message in err and err.count("\n") == 1
    assert not raw_unsafe(err)


@pytest.mark.parametrize(
    "record",
    [
        {"type": "guardrail"},
        {"type": "run_goal", "text": "g", "criteria": 5},
        {"type": "stop_guard", "event": 7, "guard": None, "step": 1, "message": ["<b>\x1b[2J"]},
        "not a record",
    ],
    ids=["fields missing", "field of another type", "fields of other types", "not an object"],
)
def test_a_record_this_version_cannot_read_is_one_line_naming_the_entry_and_exit_2_not_a_traceback(
    tmp_path: Path, recorded: Recorded, capsys: pytest.CaptureFixture[str], record: object
) -> None:
    db = tmp_path / "damaged.db"
    copy_of(recorded, db)
    with sqlite3.connect(db) as conn:  # a damaged log, or a record a newer version wrote
        seq = conn.execute("SELECT MIN(seq) FROM log WHERE records LIKE '%run_goal%'").fetchone()[0]
        conn.execute("UPDATE log SET records = ? WHERE seq = ?", (json.dumps([record]), seq))
    for command in (
        ["show", recorded.run_id, "--db", str(db)],
        ["report", recorded.run_id, "--db", str(db), "-o", str(tmp_path / "r.html")],
    ):
        code, out, err = cli(capsys, *command)
        assert (code, out) == (2, ""), err
        assert err.startswith(f"stopwise {command[0]}: error: session ") and err.count("\n") == 1
        assert f"log entry {seq} cannot be read: a " in err and not raw_unsafe(err)
    code, _, err = cli(capsys, "replay", str(db))
    assert code == 1 and f"log entry {seq} cannot be read" in err and "the session is skipped" in err


@pytest.mark.parametrize("kind", ["directory", "not sqlite", "newer version", "missing folder"])
def test_a_database_path_that_cannot_be_a_log_is_one_line_and_exit_2_for_run_and_show(
    tmp_path: Path, recorded: Recorded, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    agent_file = tmp_path / "agents.py"
    agent_file.write_text(
        "from stopwise import Agent, ScriptedModel\nagent = Agent(name='a', model=ScriptedModel(['hi']))\n"
    )
    db = tmp_path / "log.db"
    if kind == "directory":
        db.mkdir()
    elif kind == "not sqlite":
        db.write_text("hello")
    elif kind == "newer version":
        copy_of(recorded, db)
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA user_version = 999")
    else:
        db = tmp_path / "no" / "log.db"
    for args in (["run", f"{agent_file}:agent", "hi", "--db", str(db)], ["show", "x", "--db", str(db)]):
        code, out, err = cli(capsys, *args)
        assert code == 2 and out == "", (args, out)
        assert err.startswith(f"stopwise {args[0]}: error: ") and err.count("\n") == 1, err
