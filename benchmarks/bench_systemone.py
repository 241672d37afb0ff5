"""What ``SystemOneEvaluator`` costs per turn apart from the network.

A System One server on loopback (``tests/systemone_server.py``) answers the six default conditions. Two
clients send it the same request body over a kept-alive connection, in interleaved rounds (the order swapped
every round so that drift in machine load hits both alike):

- **baseline**: a plain ``httpx.AsyncClient.post`` of the ready-made body bytes, reading the response bytes;
- **evaluator**: ``SystemOneEvaluator.evaluate(projection, DEFAULT_CONDITIONS)``, which also builds the body
  from the question set and projection, serialises it, and parses and checks the answers.

The evaluator's overhead is the median evaluator call minus the median baseline call (and, as a check, the
median of the per-round differences). It also times the same work with no network at all: building and
serialising the request, then decoding and checking a ready response.

Target: overhead under 1 ms per turn (median).

Usage:
  python benchmarks/bench_systemone.py [--rounds 2000] [--quick] [--json PATH] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from stopwise.guardian import DEFAULT_CONDITIONS, Answers, project  # noqa: E402
from stopwise.guardian.evaluators import SystemOneEvaluator  # noqa: E402
from stopwise.guardian.evaluators.systemone import _decode, _encode, _ssl_context  # noqa: E402
from stopwise.messages import Message, Role, ToolCall  # noqa: E402
from systemone_server import SystemOneServer, choice, noul, score  # noqa: E402

TARGET_MS = 1.0
KEY = "sk-bench"


def _projection() -> Any:
    """A run of six steps with tool results: a projection of a few kilobytes, as the guardian sends."""
    messages = [Message.user("Find the three cheapest flights from Paris to Lisbon next Friday and book one.")]
    for i in range(6):
        call = ToolCall("search_flights", {"from": "CDG", "to": "LIS", "page": i}, id=f"c{i}")
        messages.append(Message(Role.ASSISTANT, f"Searching page {i} of the results.", [call]))
        rows = "; ".join(f"flight TP{100 + 10 * i + j} at {80 + 7 * j} EUR" for j in range(8))
        messages.append(Message(Role.TOOL, rows, tool_call_id=f"c{i}"))
    return project(messages, goal=messages[0].content, criteria=("three flights listed", "one booked"))


async def _bench(rounds: int) -> dict[str, Any]:
    server = SystemOneServer(key=KEY).start()
    server.answers.update(
        {
            "integrity": noul(0.02),
            "risk": choice({"read_only": 0.7, "reversible": 0.2, "irreversible": 0.08, "regulated": 0.02}),
            "infeasible": noul(0.1),
            "goal_reached": noul(0.4),
            "drift": score([0.0, 0.05, 0.1, 0.25, 0.6]),
            "stagnation": noul(0.3),
        }
    )
    projection = _projection()
    conditions = DEFAULT_CONDITIONS.conditions
    evaluator = SystemOneEvaluator(base_url=server.url, model="jev-latest", api_key=KEY, timeout=5.0)
    body, _ = _encode(evaluator.model, projection.text, conditions)
    assert body is not None
    content = json.dumps(body, ensure_ascii=False).encode()
    headers = dict(evaluator._headers)
    plain = httpx.AsyncClient(timeout=None, verify=_ssl_context())
    try:
        # Warm-up: connections, imports and first-call paths on both sides.
        for _ in range(50):
            await plain.post(evaluator.url, content=content, headers=headers)
            answers = await evaluator.evaluate(projection, DEFAULT_CONDITIONS)
        assert not any(a.uncertain for a in answers.answers.values()), answers
        baseline: list[float] = []
        measured: list[float] = []
        gc.collect()
        gc.disable()  # a collection landing in one side's call would be charged to it alone
        try:
            for r in range(rounds):
                for side in ("baseline", "evaluator") if r % 2 == 0 else ("evaluator", "baseline"):
                    started = time.perf_counter()
                    if side == "baseline":
                        response = await plain.post(evaluator.url, content=content, headers=headers)
                        response.raise_for_status()
                        baseline.append(time.perf_counter() - started)
                    else:
                        await evaluator.evaluate(projection, DEFAULT_CONDITIONS)
                        measured.append(time.perf_counter() - started)
                if r % 200 == 199:
                    gc.collect()
        finally:
            gc.enable()
        response_bytes = (await plain.post(evaluator.url, content=content, headers=headers)).content
    finally:
        await plain.aclose()
        await evaluator.aclose()
        server.stop()

    # The same work with no network: build and serialise the request, decode and check a ready response.
    ready = httpx.Response(200, content=response_bytes)
    offline: list[float] = []
    for _ in range(max(rounds, 1000)):
        started = time.perf_counter()
        built, _ = _encode("jev-latest", projection.text, conditions)
        json.dumps(built, ensure_ascii=False, allow_nan=False).encode()
        version, got = _decode(ready, "jev-latest", conditions, "systemone")
        Answers("systemone", version, got).checked(conditions)
        offline.append(time.perf_counter() - started)

    ms = 1000.0
    base_median = statistics.median(baseline) * ms
    eval_median = statistics.median(measured) * ms
    paired = statistics.median(m - b for m, b in zip(measured, baseline, strict=True)) * ms
    return {
        "rounds": rounds,
        "state_chars": len(projection.text),
        "request_bytes": len(content),
        "response_bytes": len(response_bytes),
        "questions": len(conditions),
        "baseline_median_ms": base_median,
        "evaluator_median_ms": eval_median,
        "overhead_ms": eval_median - base_median,
        "overhead_paired_median_ms": paired,
        "offline_build_parse_median_ms": statistics.median(offline) * ms,
        "target_ms": TARGET_MS,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000, help="timed rounds (one call of each side per round)")
    parser.add_argument("--quick", action="store_true", help="300 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    rounds = 300 if args.quick else args.rounds
    figures = asyncio.run(_bench(rounds))
    figures["python"] = platform.python_version()
    figures["httpx"] = httpx.__version__
    met = figures["overhead_ms"] < TARGET_MS
    print(f"SystemOneEvaluator overhead, {rounds} interleaved rounds, {figures['questions']} questions,")
    print(
        f"state {figures['state_chars']} chars, request {figures['request_bytes']} B, "
        f"response {figures['response_bytes']} B (python {figures['python']}, httpx {figures['httpx']})"
    )
    print(f"  plain httpx round trip (median)      {figures['baseline_median_ms']:8.3f} ms")
    print(f"  evaluator.evaluate (median)          {figures['evaluator_median_ms']:8.3f} ms")
    print(
        f"  overhead: difference of medians      {figures['overhead_ms']:8.3f} ms   "
        f"target < {TARGET_MS:g} ms: {'met' if met else 'MISSED'}"
    )
    print(f"  overhead: median of paired rounds    {figures['overhead_paired_median_ms']:8.3f} ms")
    print(f"  build + parse, no network (median)   {figures['offline_build_parse_median_ms']:8.3f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
