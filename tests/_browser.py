"""A real headless Chromium for the browser tests: Debian's ``chromium`` driven by Playwright.

Outside CI a machine without the browser or Playwright skips these tests, saying how to enable them; in CI
(``CI`` set, as ``.ci/run`` runs) their absence fails the tests instead, so a broken install cannot pass.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

HOW_TO_ENABLE = (
    "needs Chromium and Playwright: apt-get install chromium; pip install -e '.[test]' "
    "(or set STOPWISE_CHROMIUM to a Chromium binary)"
)

# The flags of the brief: no sandbox (CI runs as root in a container), no GPU, and nothing that reaches out to
# the network on its own (background requests, component updates, sync).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


T = TypeVar("T")


def off_the_page_loop(fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own: Playwright's sync API keeps an event loop running on the test's thread
    while a browser is open, so code that calls ``asyncio.run`` (stopwise's CLI, a store) runs beside it."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def chromium_path() -> str | None:
    return os.environ.get("STOPWISE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A launched Chromium (a Playwright ``Browser``), shared by a module's tests."""
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if path is None or sync_playwright is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {HOW_TO_ENABLE}")
        pytest.skip(HOW_TO_ENABLE)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
