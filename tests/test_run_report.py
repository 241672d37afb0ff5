"""``stopwise report RUN -o FILE``: one self-contained HTML page per run, checked in a real headless Chromium
(the DOM it builds, the requests it makes, a screenshot's size)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _browser import browser, off_the_page_loop  # noqa: F401  (browser: the fixture)
from stopwise import Agent, FunctionModel, Reply, Runner, SQLiteStore, ToolCall, tool
from stopwise.cli import main
from stopwise.demo import run_demo

# Slow: a headless browser. `pytest -m "not slow"` leaves them out; CI runs them.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    assert off_the_page_loop(lambda: asyncio.run(run_demo(db))).ok
    return db


def session_of(db: Path, suffix: str) -> str:
    async def sessions() -> list[str]:
        store = SQLiteStore(db)
        try:
            return await store.list_sessions(100)
        finally:
            await store.close()

    return next(s for s in off_the_page_loop(lambda: asyncio.run(sessions())) if s.endswith(suffix))


def report(db: Path, ref: str, out: Path) -> Path:
    """``stopwise report`` run as a real process."""
    done = subprocess.run(
        [sys.executable, "-m", "stopwise", "report", ref, "--db", str(db), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"wrote {out} (run ")
    return out


def open_page(browser: Any, path: Path) -> tuple[Any, list[str]]:  # noqa: F811
    """The page loaded from the file, and every URL it asked for besides itself."""
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if r.url != path.as_uri() else None)
    page.goto(path.as_uri())
    return page, requests


def test_report_shows_every_step_and_a_plot_per_guardian_condition_with_threshold_band_and_outcomes(
    browser: Any,  # noqa: F811
    demo_db: Path,
    tmp_path: Path,
) -> None:
    html = report(demo_db, session_of(demo_db, "-drift"), tmp_path / "run.html")
    page, requests = open_page(browser, html)
    try:
        assert requests == []  # self-contained: nothing fetched
        assert page.inner_text("#status") == "failed"
        assert page.inner_text("#reason") == "infeasible"
        assert page.eval_on_selector_all("#steps .step", "els => els.map(e => e.dataset.step)") == ["1", "2", "3", "4"]
        conditions = page.eval_on_selector_all("svg.series", "els => els.map(e => e.dataset.condition)")
        assert {"drift", "goal_reached", "infeasible", "stagnation"} <= set(conditions)
        drift = "svg.series[data-condition='drift']"
        turn_outcomes = page.eval_on_selector_all(f"{drift} circle.marker", "els => els.map(e => e.dataset.outcome)")
        assert turn_outcomes == ["continue", "replan", "replan", "stop_failure"]
        # The threshold line lies inside the shaded band, and the markers (p = 0.92) above both.
        geometry = page.eval_on_selector(
            drift,
            """svg => {
                const band = svg.querySelector('rect.band').getBBox();
                const t = svg.querySelector('line.threshold').getBBox();
                const ys = [...svg.querySelectorAll('circle.marker')].map(c => c.cy.baseVal.value);
                return {top: band.y, bottom: band.y + band.height, t: t.y, markers: ys};
            }""",
        )
        assert geometry["top"] < geometry["t"] < geometry["bottom"]
        assert all(y < geometry["top"] for y in geometry["markers"])
        # Tool calls are collapsed until opened.
        tool = page.locator("#steps details.tool").first
        assert not tool.evaluate("d => d.open")
        assert not page.locator("#steps details.tool pre").first.is_visible()
        tool.locator("summary").click()
        assert page.locator("#steps details.tool pre").first.is_visible()
        shot = page.screenshot(full_page=True)
        width, height = int.from_bytes(shot[16:20], "big"), int.from_bytes(shot[20:24], "big")
        assert width == 1100 and height > 1500  # the page drew its plots and steps, not a blank or an error page
        assert len(shot) > 50_000
    finally:
        page.close()


def test_report_of_a_suspended_run_lists_the_pending_call_with_why(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    @tool(needs_approval=True)
    def wire(to: str) -> str:
        """Send money.

        Args:
            to: The payee.
        """
        return "sent"

    model = FunctionModel(lambda r: Reply(tool_calls=(ToolCall("wire", {"to": "<b>bob</b>"}, id="w-1"),)))
    db = tmp_path / "log.db"

    async def suspend() -> str:
        async with Runner(SQLiteStore(db)) as runner:
            result = await runner.run(Agent(name="payer", model=model, tools=(wire,)), "<script>alert(1)</script>")
            return result.session_id

    session = off_the_page_loop(lambda: asyncio.run(suspend()))
    page, _ = open_page(browser, report(db, session, tmp_path / "pending.html"))
    try:
        assert page.inner_text("#status") == "suspended"
        pending = page.locator("#pending .pending[data-call='w-1']")
        assert "tool 'wire' needs approval" in pending.inner_text()
        # Stored text is shown as text: the prompt's tag and the argument's markup never become elements.
        assert page.locator("script").count() == 0 and page.locator("#pending b", has_text="bob").count() == 0
        assert "<script>alert(1)</script>" in page.inner_text("#summary")
        assert '"to": "<b>bob</b>"' in pending.inner_text()
    finally:
        page.close()


def test_report_into_a_missing_directory_is_exit_2(
    demo_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", session_of(demo_db, "-drift"), "--db", str(demo_db), "-o", str(tmp_path / "no/r.html")]) == 2
    assert re.match(r"stopwise report: error: -o .*does not exist", capsys.readouterr().err)
