"""The log a run writes, before and after a change: scripted runs dumped from the in-memory store, per source tree.

Sixteen runs in fifteen sessions cover what a step can write: a plain run (and a second run in the same session,
with state), ``Limits`` of tool calls and of tokens, a stop guard that continues once, ``Guardian()``,
``max_steps``, a failing tool, approvals approved and rejected, input / tool-result / output guardrails, an output
type with a validator that retries, ``stop_when``, ``stop_at_tools``, a history processor, and unstorable text in
the input, the state and a stop guard's message. Each tree runs them in a fresh process with the same
deterministic ids (``uuid.uuid4`` is replaced by a digest of a counter; the calls' ids are given), and the log
entries (read back through ``load_session``), run records and states are printed with the timings normalised
(``latency_ms``, ``*_at`` and ``started_at``). The dumps must be equal, and so must the storable-text warnings.

Usage:
  python benchmarks/log_identity.py --src <tree before>/src --src src
"""

import argparse
import asyncio
import hashlib
import itertools
import os
import re
import subprocess
import sys
import uuid
from typing import Any


def _compare(trees: list[str]) -> int:
    dumps = []
    for tree in trees:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        done = subprocess.run(
            [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, timeout=600, check=True
        )
        warnings = sorted(line for line in done.stderr.splitlines() if "U+FFFD" in line)
        dumps.append((done.stdout, warnings))
        print(f"{tree}: {len(done.stdout.splitlines())} lines, {len(warnings)} storable-text warnings")
    same = all(d == dumps[0] for d in dumps[1:])
    print("[PASS] the logs are identical" if same else "[FAIL] the logs differ")
    return 0 if same else 1


async def _scenarios() -> Any:
    from pydantic import BaseModel

    from stopwise import (
        Agent,
        Approve,
        Continue,
        Fail,
        FunctionModel,
        Guardian,
        Guardrails,
        Limits,
        Pass,
        Reject,
        Reply,
        RetryOutput,
        Rewrite,
        Runner,
        StopGuard,
        ToolCall,
        Usage,
        tool,
    )
    from stopwise.store.memory import MemoryStore

    def model(n: int, name: str = "bump", usage: bool = True) -> FunctionModel:
        def fn(req: Any) -> Reply:
            k = req.step
            used = Usage(10 + k, 3, 1) if usage else None
            if k < n:
                return Reply(text=f"step {k}", tool_calls=[ToolCall(name, {"n": k}, id=f"c{k}")], usage=used)
            return Reply(text="done", usage=used)

        return FunctionModel(fn)

    @tool
    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    @tool
    async def boom(n: int) -> int:
        """Fail."""
        raise ValueError(f"bad {n}")

    @tool(needs_approval=True)
    async def pay(n: int) -> str:
        """Pay."""
        return f"paid {n}"

    class Out(BaseModel):
        answer: int

    store = MemoryStore()
    r = Runner(store)
    await r.run(Agent("plain", "x", model(5), tools=[bump], max_steps=None), "go", session_id="plain")
    second = Agent("plain2", "", model(3, usage=False), tools=[bump])
    await r.run(second, "go", session_id="plain", state={"a": 1})
    limited = Limits(tool_calls=3, total_tokens=1000)
    await r.run(Agent("lim", "x", model(8), tools=[bump], limits=limited), "go", session_id="lim")
    await r.run(Agent("limtok", "x", model(8), tools=[bump], limits=Limits(total_tokens=60)), "go", session_id="limtok")
    asked: list[int] = []

    def guard(ctx: Any) -> Any:
        asked.append(1)
        return Continue("keep going") if len(asked) == 1 else None

    guarded = Agent("sg", "x", model(3), tools=[bump], stop_guard=StopGuard(guard), max_steps=10)
    await r.run(guarded, "go", session_id="sg")
    await r.run(Agent("gd", "x", model(4), tools=[bump], guardian=Guardian()), "go", session_id="gd")
    await r.run(Agent("ms", "x", model(20), tools=[bump], max_steps=4), "go", session_id="ms")
    await r.run(Agent("err", "x", model(6, name="boom"), tools=[boom], max_steps=10), "go", session_id="err")
    payer = Agent("ap", "x", model(3, name="pay"), tools=[pay])
    result = await r.run(payer, "go", session_id="ap")
    while result.pending:
        result = await r.resume(payer, "ap", {p.call_id: Approve() for p in result.pending})
    refuser = Agent("rj", "x", model(3, name="pay"), tools=[pay])
    result = await r.run(refuser, "go", session_id="rj")
    await r.resume(refuser, "rj", {p.call_id: Reject("no") for p in result.pending})

    def on_input(ctx: Any) -> Any:
        last = ctx.messages[-1]
        return Rewrite(messages=[*ctx.messages[:-1], type(last)(last.role, last.content + "!")])

    def on_result(ctx: Any) -> Any:
        return Rewrite(result=ctx.result * 2) if isinstance(ctx.result, int) else Pass()

    def on_output(ctx: Any) -> Any:
        return Rewrite(text=ctx.text.upper())

    rails = Guardrails(on_input=on_input, on_tool_result=on_result, on_output=on_output)
    await r.run(Agent("gr", "x", model(3), tools=[bump], guardrails=rails), "go", session_id="gr")

    def structured(req: Any) -> Reply:
        if req.step < 3:
            return Reply(tool_calls=[ToolCall("bump", {"n": req.step}, id=f"o{req.step}")])
        return Reply(text=f'{{"answer": {req.step}}}')

    typed = Agent("out", "x", FunctionModel(structured), tools=[bump], output_type=Out)

    @typed.output_validator
    def bigger(out: Any) -> Any:
        if out.answer < 4:
            raise RetryOutput("bigger")
        return out

    await r.run(typed, "go", session_id="out")
    stopping = Agent("sw", "x", model(6), tools=[bump], stop_when=lambda step: step.number >= 3)
    await r.run(stopping, "go", session_id="sw")
    await r.run(Agent("sat", "x", model(6), tools=[bump], stop_at_tools=["bump"]), "go", session_id="sat")
    trimmed = Agent("hp", "x", model(4), tools=[bump], history_processors=[lambda m: list(m)[-3:]])
    await r.run(trimmed, "go", session_id="hp")
    failing = Agent("bad", "x", model(3), tools=[bump], stop_guard=StopGuard(lambda ctx: Fail("no \ud800 way\x00")))
    await r.run(failing, "go \ud800", session_id="bad", state={"k": "v\ud800"})
    return store


def _normalised(text: str) -> str:
    text = re.sub(r"'latency_ms': [0-9.e-]+", "'latency_ms': X", text)
    text = re.sub(r"started_at=[0-9.]+", "started_at=X", text)
    return re.sub(r"'([a-z_]*_at|expires)': [0-9.]+", r"'\1': X", text)


async def _dump() -> None:
    store = await _scenarios()
    for session_id in sorted(store._sessions):
        snapshot = await store.load_session(session_id)
        print("SESSION", session_id, store._sessions[session_id].state_json)
        for entry in snapshot.entries:
            print(_normalised(repr(entry)))
        for run in await store.list_runs(session_id):
            print(_normalised(repr(run)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", default=[], help="a source tree (repeatable)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.child:
        return _compare(args.src or ["src"])
    counter = itertools.count(1)
    # Deterministic ids, the same in every tree (a digest, so that prefixes of them differ too).
    uuid.uuid4 = lambda: uuid.UUID(bytes=hashlib.md5(str(next(counter)).encode()).digest())  # type: ignore[assignment]
    asyncio.run(_dump())
    return 0


if __name__ == "__main__":
    sys.exit(main())
