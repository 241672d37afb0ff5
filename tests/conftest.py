from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stopwise import MemoryStore, SQLiteStore, Store


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every store backend, each fresh; SQLite on a real file on disk."""
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "log.db")
    yield s
    await s.close()
