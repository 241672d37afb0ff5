"""Absent words are no evidence of drifting: when the recent steps act without words (clicks by coordinates,
scrolls, bare element ids, screenshots back) drift defers at a base rate instead of reading the absent goal-word
overlap as a detour, while calls whose words miss the goal (an off-topic search) read as before. A withheld
(quarantined) result is unobserved for stagnation too.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("mcp", reason="the browser agent runs a real MCP server: pip install 'stopwise[mcp]'")

from mcp.server.mcpserver import MCPServer as BrowserServer
from mcp.server.mcpserver.utilities.types import Image

from stopwise import Agent, Reply, Runner, ScriptedModel, ToolCall, tool
from stopwise.guardian import DEFAULT_CONDITIONS, GuardianOutcome
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import WITHHELD, ProjectedCall, ProjectedStep, Projection
from stopwise.mcp import MCPServer

DRIFT = DEFAULT_CONDITIONS.by_name["drift"]
STAGNATION = DEFAULT_CONDITIONS.by_name["stagnation"]
RULES = RuleEvaluator()
GOAL = "Find a support services job in Bentonville."
IMAGE = '[{"type":"image","data":"' + "iVBORw0KGgo" * 60 + '","mimeType":"image/png"}]'


def base_p_drift() -> float:
    base = RULES.coefficients.drift_unobserved
    assert base is not None
    return 1.0 - base.p({})


def screen() -> MCPServer:
    """A computer-use server in-process: every action is by coordinates or element id and returns a screenshot."""
    server = BrowserServer("screen")

    def shot(*marks: object) -> Image:
        return Image(data=b"\x89PNG\r\n" + repr(marks).encode() * 200, format="png")

    @server.tool()
    def click(x: int, y: int) -> Image:
        """Click at a point of the screen and return a screenshot."""
        return shot("click", x, y)

    @server.tool()
    def scroll(dy: int) -> Image:
        """Scroll by ``dy`` pixels and return a screenshot."""
        return shot("scroll", dy)

    @server.tool()
    def hover(element: str) -> Image:
        """Hover over an element by its id and return a screenshot."""
        return shot("hover", element)

    risks = {"click": "read_only", "scroll": "read_only", "hover": "read_only"}
    return MCPServer("screen", lambda: server, risks=risks)


COORDINATES = [
    ToolCall("click", {"x": 312, "y": 488}, id="c1"),
    ToolCall("scroll", {"dy": 400}, id="c2"),
    ToolCall("hover", {"element": "e17"}, id="c3"),
    ToolCall("click", {"x": 40, "y": 90}, id="c4"),
    ToolCall("scroll", {"dy": -200}, id="c5"),
    ToolCall("click", {"x": 655, "y": 131}, id="c6"),
    ToolCall("hover", {"element": "e42"}, id="c7"),
]


async def test_a_coordinate_only_browser_agent_runs_under_the_default_guardian_without_a_drift_replan() -> None:
    answer = "Job 9050 is the support services coordinator role in Bentonville."
    model = ScriptedModel([*(Reply(tool_calls=[c]) for c in COORDINATES), answer])
    async with screen() as server:
        agent = Agent("screen", "Browse and answer.", model, tools=await server.list_tools(), guardian=Guardian())
        result = await Runner().run(agent, GOAL)
    assert result.status == "completed", (result.status, [d.reason for d in result.decisions])
    assert all(d.outcome is GuardianOutcome.CONTINUE for d in result.decisions), [d.reason for d in result.decisions]
    read = [d.answers["drift"] for d in result.decisions if d.kind == "turn" and "drift" in d.answers]
    wordless = [a for a in read if not a.uncertain and a.defer]
    assert len(wordless) >= len(COORDINATES) - 1
    for a in wordless:
        assert a.p(DRIFT.fires_on) == pytest.approx(base_p_drift())
        assert a.p(DRIFT.fires_on) < DRIFT.threshold - DRIFT.delta


@tool
def web_search(query: str) -> str:
    """Search the web."""
    return f"Results for {query}: a chocolate layer cake with ganache, baking time 35 minutes, serves {len(query)}."


async def test_an_agent_searching_clearly_off_topic_text_still_replans_on_drift() -> None:
    queries = ["chocolate cake recipe", "ganache without cream", "layer cake baking time", "cake frosting ideas"]
    calls = [ToolCall("web_search", {"query": q}, id=f"s{i}") for i, q in enumerate(queries)]
    model = ScriptedModel([*(Reply(tool_calls=[c]) for c in calls), "done"])
    agent = Agent("a", "Answer from the web.", model, tools=[web_search], guardian=Guardian())
    result = await Runner().run(agent, GOAL)
    replans = [d for d in result.decisions if d.outcome is GuardianOutcome.REPLAN]
    assert replans, [d.reason for d in result.decisions]
    assert replans[0].reason.startswith("replan: drift p=")
    assert not replans[0].answers["drift"].defer


# --- what counts as wordless -------------------------------------------------------------------------------------


def run_of(calls: list[tuple[str, object, str]], *, text: str = "", final: str | None = None) -> Projection:
    steps = tuple(
        ProjectedStep(i + 1, text, (ProjectedCall(tool, args, result, error=False),))
        for i, (tool, args, result) in enumerate(calls)
    )
    return Projection(GOAL, (), steps, final=final)


COMPUTER_USE = [  # the shape of a provider's computer tool: an action word and a point, or a key
    ("computer", {"action": "left_click", "coordinate": [312, 488]}, IMAGE),
    ("computer", {"action": "scroll", "coordinate": [640, 400], "scroll_direction": "down", "scroll_amount": 3}, ""),
    ("computer", {"action": "key", "text": "Return"}, IMAGE),
    ("computer", {"action": "mouse_move", "coordinate": [12, 700]}, ""),
]


@pytest.mark.parametrize("window", [COMPUTER_USE[:2], COMPUTER_USE[2:], [("click", {"x": 1, "y": 2}, WITHHELD)] * 2])
def test_pointer_and_key_actions_with_no_text_back_defer_at_the_base_rate(
    window: list[tuple[str, object, str]],
) -> None:
    projection = run_of(window)
    assert RULES.drift_features(projection) == {"unobserved": 1.0}
    answer = RULES.answer(projection, DRIFT)
    assert answer.defer and not answer.uncertain
    assert answer.p(DRIFT.fires_on) == pytest.approx(base_p_drift())
    assert "cannot tell" in (answer.note or "")


@pytest.mark.parametrize(
    ("calls", "text", "final"),
    [
        ([("search", {"query": "chocolate cake recipe"}, IMAGE)] * 2, "", None),  # off-topic words, screenshot back
        ([("click", {"x": 1, "y": 2}, "Chocolate cake recipes: 12 results")] * 2, "", None),  # a page came back
        ([("click", {"x": 1, "y": 2}, IMAGE)] * 2, "Looking at cake recipes now.", None),  # the model said what
        ([("click", {"x": 1, "y": 2}, IMAGE)] * 2, "", "A chocolate cake recipe."),  # the final answer says it
    ],
)
def test_a_window_with_any_word_in_arguments_results_text_or_answer_is_read_as_before(
    calls: list[tuple[str, object, str]], text: str, final: str | None
) -> None:
    projection = run_of(calls, text=text, final=final)
    assert "unobserved" not in RULES.drift_features(projection)
    answer = RULES.answer(projection, DRIFT)
    assert not answer.defer
    aligned = RULES.coefficients.drift.p(RULES.drift_features(projection))
    assert answer.p(DRIFT.fires_on) == pytest.approx(1.0 - aligned)


def test_without_a_drift_base_rate_in_the_coefficients_a_wordless_window_is_uncertain() -> None:
    rules = RuleEvaluator(coefficients=replace(RULES.coefficients, drift_unobserved=None))
    answer = rules.answer(run_of(COMPUTER_USE), DRIFT)
    assert answer.uncertain


# --- withheld results --------------------------------------------------------------------------------------------


def test_a_repeat_of_withheld_results_is_unobserved_not_stale() -> None:
    # Four different searches whose results were all quarantined: the projection shows the same notice each time.
    steps = tuple(
        ProjectedStep(i + 1, "", (ProjectedCall("search", {"q": f"jobs {i}"}, WITHHELD, error=False),))
        for i in range(4)
    )
    projection = Projection(GOAL, (), steps)
    assert RULES.stagnation_features(projection) == {"unobserved": 1.0}
    answer = RULES.answer(projection, STAGNATION)
    assert answer.defer and answer.p(STAGNATION.fires_on) < STAGNATION.threshold
