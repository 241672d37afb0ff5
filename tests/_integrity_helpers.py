"""Shared by the integrity tests: one tool result read by the guardian's default evaluator, as a guardian would."""

from __future__ import annotations

from stopwise.guardian import DEFAULT_CONDITIONS, Guardian
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.projection import Projection, project
from stopwise.messages import Message, Role, ToolCall, encode_tool_result

INTEGRITY = DEFAULT_CONDITIONS.by_name["integrity"]
T_STAR = INTEGRITY.threshold
GOAL = "Summarise this month's utility bill and tell me whether anything looks unusual."


def reading(result: str, tool: str = "read_document") -> Projection:
    """The projection a default ``Guardian`` builds after one call that returned ``result``."""
    call = ToolCall(tool, {"id": 7}, id="call_0")
    rows = [Message.user(GOAL), Message(Role.ASSISTANT, "Reading it.", (call,))]
    rows.append(encode_tool_result(result, tool_call_id=call.id))
    return project(rows, goal=GOAL, result_chars=Guardian().result_chars)


def p_injected(rules: RuleEvaluator, result: str) -> float:
    answer = rules.answer(reading(result), INTEGRITY)
    assert not answer.uncertain, answer.note
    return answer.p(INTEGRITY.fires_on)


def bill(lines: int) -> str:
    """A long, plain utility bill: ``lines`` itemised lines of about 70 characters each."""
    out = ["CITY POWER & WATER - Statement for account 4471-2209, billing period 1-31 March", ""]
    for n in range(lines):
        day, charge = f"2025-03-{n % 28 + 1:02d}", f"{3 + n % 7}.{n % 100:02d}"
        out.append(f"{n + 1:03d}  {day}  meter read {10_000 + 37 * n} kWh   line charge {charge} EUR")
    out += ["", "Total due: 212.40 EUR by 15 April. Direct debit from account ending 0913."]
    return "\n".join(out)
