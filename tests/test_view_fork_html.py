"""``stopwise report`` of a forked run shows where it came from and each tool switch (who switched which tool on
or off, at which step), as ``stopwise show`` prints them, read back from a real SQLite log; every name from the
log is escaped."""

from __future__ import annotations

import asyncio
from html.parser import HTMLParser
from pathlib import Path

import pytest

from _switching_agent import switching_agent
from stopwise import Runner, SQLiteStore
from stopwise.cli import main

SOURCE = "s<img src=x onerror=alert(1)>"
FORKED = "f&'\"<b>"


class _Records(HTMLParser):
    """The text of each ``.rec`` element and of ``#forked-from``, keyed by its class (or id), with the step of
    the ``.step`` it sits in; and every tag the page holds."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str | None, str]] = []
        self.tags: set[str] = set()
        self._step: str | None = None
        self._open: list[tuple[str, str | None]] = []
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "step" in classes:
            self._step = a.get("data-step")
        if "rec" in classes or a.get("id") == "forked-from":
            key = a.get("id") or next(c for c in classes if c != "rec")
            self._open.append((key, a.get("data-step")))
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag in ("div", "p"):
            key, _ = self._open.pop()
            self.found.append((key, self._step if key != "forked-from" else None, "".join(self._text)))

    def handle_data(self, data: str) -> None:
        if self._open:
            self._text.append(data)


async def _forked_run(db: Path) -> tuple[str, str]:
    store = SQLiteStore(db)
    try:
        runner = Runner(store)
        source = await runner.run(switching_agent(), "q", session_id=SOURCE)
        forked = await runner.fork(switching_agent(), SOURCE, at_step=1, new_session_id=FORKED)
        assert forked.status == "completed"
        return source.run_id, forked.run_id
    finally:
        await store.close()


def test_report_of_a_forked_run_shows_its_origin_and_each_tool_switch_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    source_run, forked_run = asyncio.run(_forked_run(db))
    out = tmp_path / "fork.html"
    assert main(["report", forked_run, "--db", str(db), "-o", str(out)]) == 0
    capsys.readouterr()
    html = out.read_text(encoding="utf-8")

    page = _Records()
    page.feed(html)
    origin = f"session {SOURCE}, run {source_run}, step 1"
    assert ("forked-from", None, f"Forked from {origin}") in page.found
    assert ("fork", "1", f"forkforked from {origin}") in page.found  # on the step the fork continues from
    switches = [(step, text) for key, step, text in page.found if key == "switch"]
    assert switches == [
        ("1", "tool switchat step 1 by tool (call s1): off search"),  # copied from the source with step 1
        ("2", "tool switchat step 2 by stop_guard: on search"),  # the fork's own step
    ]
    # The session ids went in as text: no tag of theirs reached the page.
    assert "img" not in page.tags and "b" in page.tags  # <b> is the report's own markup
    assert SOURCE not in html and FORKED not in html


def test_report_of_the_source_run_shows_its_switches_and_no_fork(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    source_run, _ = asyncio.run(_forked_run(db))
    out = tmp_path / "source.html"
    assert main(["report", source_run, "--db", str(db), "-o", str(out)]) == 0
    capsys.readouterr()
    page = _Records()
    page.feed(out.read_text(encoding="utf-8"))
    assert not [f for f in page.found if f[0] in ("fork", "forked-from")]
    assert [(step, text) for key, step, text in page.found if key == "switch"] == [
        ("1", "tool switchat step 1 by tool (call s1): off search"),
        ("2", "tool switchat step 2 by stop_guard: on search"),
    ]
