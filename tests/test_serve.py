"""``stopwise serve DB``, end to end: a real server process, a real headless Chromium, a real run suspended for
approval by ``stopwise run`` and approved from the page; and the server's guards (CSRF, Host, access token)
checked with plain HTTP requests."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _browser import browser  # noqa: F401  (the fixture)
from _cli_fixtures import AGENTS, stopwise_cmd

# Slow: a server process and a browser. `pytest -m "not slow"` leaves them out; CI runs them.
pytestmark = pytest.mark.slow

Server = tuple[subprocess.Popen[str], str]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "agents.py").write_text(AGENTS, encoding="utf-8")
    run = stopwise_cmd("run", "agents.py:refunder", "Refund A-1", cwd=tmp_path)
    assert "status: suspended" in run.stdout, run.stderr
    return tmp_path


def start(workdir: Path, *args: str) -> Server:
    proc = subprocess.Popen(
        [sys.executable, "-m", "stopwise", "serve", "stopwise.db", "--port", "0", *args],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the server prints its URL once it listens
    match = re.match(r"stopwise serve: (http://\S+)", line)
    if match is None:
        proc.kill()
        pytest.fail(f"no URL printed: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, match.group(1)


@pytest.fixture
def server(workdir: Path) -> Iterator[Server]:
    proc, url = start(workdir, "--agent", "agents.py:refunder")
    try:
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def request(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


def test_a_person_approves_a_pending_call_from_the_page_and_the_run_completes(
    browser: Any,  # noqa: F811
    server: Server,
    workdir: Path,
) -> None:
    _, url = server
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    try:
        page.goto(url)
        assert page.inner_text("#waiting") == "1 waiting for a decision"
        page.click("#runs tr.suspended-row a")
        assert page.inner_text("#status") == "suspended"
        pending = page.locator("#pending .pending[data-call='refund-1']")
        assert "tool 'issue_refund' needs approval" in pending.inner_text()
        assert page.locator("#decide input[name='decision:refund-1'][value='approve']").is_checked()
        assert not (workdir / "effects.log").exists()
        page.click("#decide button[type='submit']")
        page.wait_for_selector("#status")
        assert page.inner_text("#status") == "completed"
        assert page.inner_text("#output").endswith("Done: refunded 5 EUR on A-1")
        assert page.locator("#decide").count() == 0
        assert (workdir / "effects.log").read_text() == "refund A-1 5\n"
    finally:
        page.close()


def test_a_modified_call_runs_with_the_arguments_typed_on_the_page(
    browser: Any,  # noqa: F811
    server: Server,
    workdir: Path,
) -> None:
    _, url = server
    page = browser.new_page()
    try:
        page.goto(url)
        page.click("#runs tr.suspended-row a")
        page.check("#decide input[name='decision:refund-1'][value='modify']")
        page.fill("#decide textarea[name='args:refund-1']", '{"order": "A-1", "amount_eur": 2}')
        page.click("#decide button[type='submit']")
        page.wait_for_selector("#status")
        assert page.inner_text("#status") == "completed"
        assert (workdir / "effects.log").read_text() == "refund A-1 2\n"
    finally:
        page.close()


def test_a_decision_without_the_csrf_token_is_refused_and_runs_nothing(server: Server, workdir: Path) -> None:
    _, url = server
    status, body, _ = request(url)
    run_id = re.search(r"<tr data-run='([0-9a-f]+)' class='suspended-row'", body).group(1)  # type: ignore[union-attr]
    for form in (b"decision%3Arefund-1=approve", b"csrf=guess&decision%3Arefund-1=approve"):
        status, body, _ = request(f"{url}runs/{run_id}/decide", data=form)
        assert (status, body) == (403, "missing or wrong CSRF token\n")
    assert not (workdir / "effects.log").exists()


def test_a_request_for_another_host_name_is_refused(server: Server) -> None:
    _, url = server
    port = url.rsplit(":", 1)[1].strip("/")
    status, _, _ = request(url, headers={"Host": f"attacker.example:{port}"})
    assert status == 421
    assert request(url, headers={"Host": f"localhost:{port}"})[0] == 200


def test_beyond_loopback_every_request_needs_the_access_token(workdir: Path) -> None:
    proc, url = start(workdir, "--host", "0.0.0.0", "--token", "s3cret-token")
    try:
        assert url.endswith("/?token=s3cret-token")
        base = url.split("?", 1)[0].replace("0.0.0.0", "127.0.0.1")
        assert request(base)[0] == 401
        assert request(base + "?token=wrong")[0] == 401
        status, _, headers = request(base + "?token=s3cret-token")
        assert status == 200
        cookie = headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert request(base, headers={"Cookie": cookie.split(";", 1)[0]})[0] == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "warning: listening on 0.0.0.0" in err
