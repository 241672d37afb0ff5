"""Reading many sessions of a store one at a time, in constant memory: what whole-database commands walk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable

from stopwise.errors import UnreadableEntry
from stopwise.store.base import SessionSnapshot, Store

__all__ = ["every_session", "sessions_named"]

OnUnreadable = Callable[[UnreadableEntry], None]


async def every_session(
    store: Store,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_unreadable: OnUnreadable | None = None,
    batch: int = 200,
) -> AsyncIterator[SessionSnapshot]:
    """Each session of ``store``, loaded one at a time in key order (``Store.iter_sessions``), so a walk holds one
    session and one batch of ids whatever the database's size. ``progress(done, total)`` is called after each
    session. A session with an entry this version cannot read raises ``UnreadableEntry``; with ``on_unreadable``
    it is handed to that callback instead and the walk goes on: no session is left out without a word."""
    total = await store.count_sessions()
    done = 0
    async for ids in store.iter_sessions(batch):
        for session_id in ids:
            snapshot = await _load(store, session_id, on_unreadable)
            done += 1
            if progress is not None:
                progress(done, max(total, done))
            if snapshot is not None:
                yield snapshot


async def sessions_named(
    store: Store, session_ids: Iterable[str], *, on_unreadable: OnUnreadable | None = None
) -> AsyncIterator[SessionSnapshot]:
    """Each of ``session_ids`` that exists, loaded one at a time; an unreadable one as in ``every_session``."""
    for session_id in session_ids:
        snapshot = await _load(store, session_id, on_unreadable)
        if snapshot is not None:
            yield snapshot


async def _load(store: Store, session_id: str, on_unreadable: OnUnreadable | None) -> SessionSnapshot | None:
    try:
        return await store.load_session(session_id)
    except UnreadableEntry as exc:
        if on_unreadable is None:
            raise
        on_unreadable(exc)
        return None
