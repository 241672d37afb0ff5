"""Per-step overhead of stopwise's deciders inside a peer's loop: each bare peer (pydantic-ai, the OpenAI Agents
SDK, LangGraph) against the same peer with the stopwise integration attached, side by side in one run.

The script is the shared one of ``_frameworks.py`` (an instant fake model asks for one call of an instant async
tool on every step but the last, each with new arguments). The integrated agent consults, on every step, a
tool-call guardrail (it passes), the guardian's risk gate with the offline rule evaluator (the tool is declared
read-only, so every call runs), the guardian's turn conditions once the tool ran (LangGraph: all of them, on the
turn; pydantic-ai and the OpenAI Agents SDK: integrity and stagnation, on the result), and on the final answer a
stop guard (it accepts) and an output guardrail (it passes); every decision is written to an in-memory store. The
difference per step is what the integration costs; the ratio is against the bare peer.

Method: both variants are built and warmed up with one full run, then timed in interleaved rounds (one run each
per round, the order alternating) so that drift in machine load hits them alike; medians are reported.

The per-step cost of a long run shows whether the integration's work per step grows with the history (a
conversion or a scan of every message on every step): compare ``--steps 50`` with ``--steps 500``.

``--wide N`` times instead one wide step through pydantic-ai: the model asks for N calls in one reply, then
answers. The integration's hooks run per call (the risk gate) and per result (integrity and stagnation), so a
cost per call that grows with N (each hook projecting all N calls) shows as the per-call figure growing:
compare ``--wide 50`` with ``--wide 500``.

Usage:
  python benchmarks/bench_integrations.py [--steps 50] [--runs 9] [--peer all|pydantic-ai|openai-agents|langgraph]
  python benchmarks/bench_integrations.py --wide 500 [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import uuid
from typing import Any

from _frameworks import TOOL_NAME, Adapter, LangGraph, NotInstalled, OpenAIAgents, PydanticAI


class PydanticAIWithStopwise(PydanticAI):
    key = "pydantic-ai+stopwise"
    label = "pydantic-ai + stopwise"

    def capabilities(self) -> list[Any]:
        from stopwise.integrations.pydantic_ai import StopwiseCapability

        return [StopwiseCapability(**_deciders())]


def _deciders() -> dict[str, Any]:
    """The same deciders for every peer: each passes, so the script runs to its end."""
    from stopwise.guardian import Guardian
    from stopwise.guardrails import Guardrails
    from stopwise.stop.guard import StopGuard

    def allow(ctx: Any) -> None:
        return None

    return {
        "stop_guard": StopGuard(lambda ctx: None, name="accept"),
        "guardrails": Guardrails(on_tool_call=[allow], on_output=[allow]),
        "guardian": Guardian(),
        "risks": {TOOL_NAME: "read_only"},
    }


class OpenAIAgentsWithStopwise(OpenAIAgents):
    key = "openai-agents+stopwise"
    label = "openai-agents + stopwise"

    async def build(self) -> None:
        await super().build()
        from stopwise.integrations.openai_agents import Stopwise

        self.stopwise = Stopwise(**_deciders())
        self.agent = self.stopwise.attach(self.agent)

    async def _invoke(self) -> Any:
        result = await self.stopwise.run(self.agent, "go", max_turns=self.max_turns)
        return result.final_output


class LangGraphWithStopwise(LangGraph):
    key = "langgraph+stopwise"
    label = "langgraph + stopwise"

    def wire(self, graph: Any, tools: list[Any], route: Any) -> None:
        from langgraph.graph import START

        from stopwise.integrations.langgraph import Stopwise

        stopwise = Stopwise(**_deciders())
        graph.add_node("finish", stopwise.finish_node(model="agent", tools="tools"))
        graph.add_node("tools", stopwise.tool_node(tools, model="agent"))  # it routes itself: no edge out
        graph.add_edge(START, "agent")
        graph.add_edge("agent", "finish")

    async def _invoke(self) -> Any:
        # A thread per run, as an application has: the integration keeps a run per thread until it ends.
        config = {**self.config, "configurable": {"thread_id": uuid.uuid4().hex}}
        state = await self.app.ainvoke({"messages": [("user", "go")]}, config=config)
        return state["messages"][-1].content


async def _timed(adapter: Adapter) -> float:
    gc.collect()
    started = time.perf_counter()
    await adapter.run_once()
    return (time.perf_counter() - started) / adapter.steps


async def compare(bare: Adapter, integrated: Adapter, runs: int) -> None:
    try:
        for adapter in (bare, integrated):
            await adapter.build()
            await adapter.run_once()  # warm-up: imports, schema generation, first-run paths
    except NotInstalled as exc:
        print(f"{bare.label}: {exc}")
        return
    samples: dict[str, list[float]] = {bare.label: [], integrated.label: []}
    for r in range(runs):
        order = (bare, integrated) if r % 2 == 0 else (integrated, bare)
        for adapter in order:
            samples[adapter.label].append(await _timed(adapter))
    base = statistics.median(samples[bare.label])
    with_us = statistics.median(samples[integrated.label])
    print(f"{bare.label} {bare.version}")
    print(f"  {bare.label:28} {base * 1e6:9.0f} us per step")
    print(f"  {integrated.label:28} {with_us * 1e6:9.0f} us per step")
    print(f"  overhead per step: {(with_us - base) * 1e6:.0f} us ({with_us / base:.2f}x the bare peer)")


def _wide_agent(calls: int, integrated: bool) -> Any:
    """A pydantic-ai agent whose model asks for ``calls`` calls in one reply, then answers (per run)."""
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    from stopwise.integrations.pydantic_ai import StopwiseCapability

    async def bump(n: int) -> int:
        """Add one."""
        return n + 1

    async def model_fn(messages: list[Any], info: Any) -> Any:
        answered = any(getattr(p, "part_kind", "") == "tool-return" for p in messages[-1].parts)
        parts: list[Any] = (
            [TextPart("done")]
            if answered
            else [ToolCallPart(TOOL_NAME, {"n": i}, tool_call_id=f"c{i}") for i in range(calls)]
        )
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=1, output_tokens=1))

    capabilities = [StopwiseCapability(**_deciders())] if integrated else []
    return Agent(
        FunctionModel(model_fn), instructions="x", tools=[Tool(bump, takes_ctx=False)], capabilities=capabilities
    )


async def wide(calls: int, runs: int) -> int:
    try:
        from pydantic_ai.usage import UsageLimits
    except ImportError:
        print("pydantic-ai: not installed")
        return 0
    limits = UsageLimits(request_limit=None)
    agents = {"pydantic-ai": _wide_agent(calls, False), "pydantic-ai + stopwise": _wide_agent(calls, True)}
    samples: dict[str, list[float]] = {label: [] for label in agents}
    for agent in agents.values():
        await agent.run("go", usage_limits=limits)  # warm-up
    for r in range(runs):
        for label in list(agents) if r % 2 == 0 else reversed(list(agents)):
            gc.collect()
            started = time.perf_counter()
            await agents[label].run("go", usage_limits=limits)
            samples[label].append(time.perf_counter() - started)
    print(f"one step of {calls} calls, {runs} timed runs each, medians; Python {sys.version.split()[0]}")
    base, with_us = (statistics.median(v) for v in samples.values())
    for label, value in zip(samples, (base, with_us), strict=True):
        print(f"  {label:28} {value * 1e3:9.1f} ms per run  {value / calls * 1e6:8.0f} us per call")
    print(f"  overhead per call: {(with_us - base) / calls * 1e6:.0f} us ({with_us / base:.1f}x the bare peer)")
    return 0


PEERS: dict[str, tuple[type[Adapter], type[Adapter]]] = {
    "pydantic-ai": (PydanticAI, PydanticAIWithStopwise),
    "openai-agents": (OpenAIAgents, OpenAIAgentsWithStopwise),
    "langgraph": (LangGraph, LangGraphWithStopwise),
}


async def main_async(steps: int, runs: int, peer: str = "all") -> int:
    print(f"{steps} steps per run, {runs} timed runs each, medians; Python {sys.version.split()[0]}")
    for name, (bare, integrated) in PEERS.items():
        if peer in ("all", name):
            await compare(bare(steps), integrated(steps), runs)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--peer", choices=["all", *PEERS], default="all")
    parser.add_argument("--wide", type=int, default=0, help="one step of this many calls (pydantic-ai)")
    args = parser.parse_args(argv)
    if args.wide:
        return asyncio.run(wide(args.wide, args.runs))
    return asyncio.run(main_async(args.steps, args.runs, args.peer))


if __name__ == "__main__":
    sys.exit(main())
