"""What tracing costs per step: a run with tracing off, with a no-op ``on_event`` observer, and with
``stopwise.telemetry.RunTracer`` on the OpenTelemetry SDK (spans recorded, then dropped by a processor that
exports nothing, so the figure is stopwise's and the SDK's span work, not an exporter's I/O).

Each run is ``--steps`` steps in memory: an instant ``FunctionModel`` asks for one call of an instant tool on
every step but the last. The configurations are timed in interleaved rounds (order rotated each round) and the
median per-step time of each is printed with its ratio to tracing off. With ``--baseline-src DIR`` the "off"
configuration is also timed with stopwise imported from DIR (e.g. the main branch's ``src``, which has no
``on_event`` at all), in a subprocess, as the baseline that "no cost when off" is measured against.

Usage:
  python benchmarks/bench_telemetry.py [--steps 200] [--rounds 7] [--baseline-src /path/to/main/src] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any


def build(steps: int) -> tuple[Any, Any]:
    from stopwise import Agent, FunctionModel, Reply, ToolCall, tool

    @tool
    async def ping(n: int) -> int:
        """Echo.

        Args:
            n: A number.
        """
        return n

    def reply(request: Any) -> Reply | str:
        if request.step >= steps:
            return "done"
        return Reply(tool_calls=(ToolCall("ping", {"n": request.step}, id=f"c{request.step}"),))

    return Agent(name="bench", model=FunctionModel(reply), tools=(ping,), max_steps=steps + 1), None


async def one_run(make_runner: Any, agent: Any) -> float:
    runner = make_runner()
    started = time.perf_counter()
    result = await runner.run(agent, "go")
    elapsed = time.perf_counter() - started
    assert result.ok, result
    return elapsed


def configurations() -> dict[str, Any]:
    from stopwise import Runner

    configs: dict[str, Any] = {"off": lambda: Runner()}
    configs["no-op observer"] = lambda: Runner(on_event=lambda agent, event: None)
    try:
        from opentelemetry.sdk.trace import TracerProvider

        from stopwise.telemetry import RunTracer
    except ImportError:
        print("RunTracer: not measured (pip install -e '.[test]': opentelemetry-sdk)", file=sys.stderr)
        return configs
    provider = TracerProvider()  # no span processor: spans are recorded and dropped
    tracer = RunTracer(provider)
    configs["RunTracer (SDK, no export)"] = lambda: Runner(on_event=tracer)
    return configs


def measure(steps: int, rounds: int, only_off: bool) -> dict[str, float]:
    agent, _ = build(steps)
    configs = configurations()
    if only_off:
        from stopwise import Runner

        configs = {"off": lambda: Runner()}
    for make in configs.values():  # warm-up
        asyncio.run(one_run(make, agent))
    samples: dict[str, list[float]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(asyncio.run(one_run(configs[name], agent)) / steps)
    return {name: statistics.median(s) for name, s in samples.items()}


def _off_in_subprocess(src: str, steps: int, rounds: int) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--only-off", "--steps", str(steps), "--rounds", str(rounds)],
        env={**os.environ, "PYTHONPATH": src},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(json.loads(out)["off"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline-src", metavar="DIR", help="stopwise sources to time 'off' against")
    parser.add_argument("--only-off", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    figures = measure(args.steps, args.rounds, args.only_off)
    if args.only_off:
        print(json.dumps(figures))
        return 0
    if args.baseline_src:
        # Both in fresh processes, alternating, so neither gets the warmer interpreter or the quieter minute.
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
        runs: dict[str, list[float]] = {"baseline": [], "this": []}
        for _ in range(3):
            for name, src in (("baseline", args.baseline_src), ("this", here)):
                runs[name].append(_off_in_subprocess(src, args.steps, args.rounds))
        figures = {
            f"off, separate process: baseline {args.baseline_src}": statistics.median(runs["baseline"]),
            "off, separate process: this tree": statistics.median(runs["this"]),
            **figures,
        }
    off = figures["off"]
    print(f"{args.steps} steps per run, median of {args.rounds} interleaved runs per configuration, in memory")
    print(f"{'configuration':<60} {'us/step':>9} {'vs off':>8}")
    for name, seconds in figures.items():
        print(f"{name:<60} {seconds * 1e6:>9.1f} {seconds / off:>7.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"steps": args.steps, "rounds": args.rounds, "seconds_per_step": figures}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
