"""``stopwise show`` (text and ``--json``) shows a fork's origin and the tool switches a run committed, read back
from a real SQLite log: a reader of the timeline sees why a tool stopped being offered and where a session came
from."""

from __future__ import annotations

import io
from pathlib import Path

from _switching_agent import switching_agent
from stopwise import Runner, SQLiteStore
from stopwise._cli.show import load_view, render_text


async def test_show_prints_each_tool_switch_and_a_forks_origin(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    store = SQLiteStore(db)
    try:
        runner = Runner(store)
        source = await runner.run(switching_agent(), "q", session_id="s")
        forked = await runner.fork(switching_agent(), "s", at_step=1, new_session_id="s-fork")
    finally:
        await store.close()

    out = io.StringIO()
    render_text(await load_view(db, source.run_id), out)
    text = out.getvalue()
    assert "tool switch by tool: off search" in text
    assert "tool switch by stop_guard: on search" in text

    view = await load_view(db, forked.run_id)
    origins = [s.fork for s in view.steps if s.fork is not None]
    assert [(f.source_session_id, f.source_run_id, f.at_step) for f in origins] == [("s", source.run_id, 1)]
    out = io.StringIO()
    render_text(view, out)
    assert f"forked from: session s, run {source.run_id}, step 1" in out.getvalue()
    data = [s.to_data() for s in view.steps]
    assert [d["fork"]["source_session_id"] for d in data if d["fork"] is not None] == ["s"]
