"""A tool result with no text (a screenshot, an action that returns nothing) is no evidence of being stuck: the
stagnation rule defers at the base rate when no recent call returned text, while a literal repeat of one call is
still caught by the repeat limit and results with text (``[]``, ``{}``, "No results found", a page) read as before.
"""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the screenshot agent runs a real MCP server: pip install 'stopwise[mcp]'")

from mcp.server.mcpserver import MCPServer as BrowserServer
from mcp.server.mcpserver.utilities.types import Image

from stopwise import Agent, Reply, Runner, ScriptedModel, ToolCall, tool
from stopwise.guardian import DEFAULT_CONDITIONS, GuardianOutcome
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import ProjectedCall, ProjectedStep, Projection
from stopwise.mcp import MCPServer
from stopwise.result import RunResult

STAGNATION = DEFAULT_CONDITIONS.by_name["stagnation"]
T = STAGNATION.threshold
RULES = RuleEvaluator()


def browser() -> MCPServer:
    """A computer-use server in-process: every action answers with a screenshot."""
    server = BrowserServer("browser")

    @server.tool()
    def open_page(url: str) -> Image:
        """Open a page and return a screenshot."""
        return Image(data=b"\x89PNG\r\n" + url.encode() * 200, format="png")

    @server.tool()
    def find_in_page(text: str) -> Image:
        """Highlight a text on the page and return a screenshot."""
        return Image(data=b"\x89PNG\r\n" + text.encode() * 300, format="png")

    read_only = {"open_page": "read_only", "find_in_page": "read_only"}
    return MCPServer("browser", lambda: server, risks=read_only)


@tool(risk="read_only")
def click_text(label: str) -> str:
    """Click the element that shows ``label``; nothing comes back."""
    return ""


def browsing(calls: list[ToolCall], answer: str) -> ScriptedModel:
    return ScriptedModel([*(Reply(tool_calls=[c]) for c in calls), answer])


# Each action names what it looks for (so drift, which reads the actions' words, has something to read).
VARIED = [
    ToolCall("open_page", {"url": "https://jobs.example.org/search?q=support+services+bentonville"}, id="c1"),
    ToolCall("find_in_page", {"text": "support services"}, id="c2"),
    ToolCall("click_text", {"label": "Support services jobs in Bentonville"}, id="c3"),
    ToolCall("find_in_page", {"text": "Bentonville, Arkansas"}, id="c4"),
    ToolCall("open_page", {"url": "https://jobs.example.org/job/9050-support-services-bentonville"}, id="c5"),
    ToolCall("find_in_page", {"text": "support services coordinator Bentonville"}, id="c6"),
    ToolCall("click_text", {"label": "Bentonville support services job 9050"}, id="c7"),
]


def stagnation_answers(result: RunResult) -> list[tuple[bool, float]]:
    out = []
    for d in result.decisions:
        answer = d.answers.get("stagnation")
        if d.kind == "turn" and answer is not None and not answer.uncertain:
            out.append((answer.defer, answer.p(STAGNATION.fires_on)))
    return out


async def test_a_screenshot_only_browser_agent_runs_under_the_default_guardian_without_a_stagnation_replan() -> None:
    async with browser() as server:
        tools = await server.list_tools()
        agent = Agent(
            "browser",
            "Browse and answer.",
            browsing(VARIED, "Job 9050 is the support services coordinator role in Bentonville."),
            tools=[*tools, click_text],
            guardian=Guardian(),
        )
        result = await Runner().run(agent, "Find a support services job in Bentonville.")
    assert result.status == "completed", (result.status, [d.reason for d in result.decisions])
    assert all(d.outcome is GuardianOutcome.CONTINUE for d in result.decisions)
    # The turns after the first two read only screenshots and empty results: deferred at the base rate, under t*.
    read = stagnation_answers(result)
    assert len(read) >= 5
    assert all(deferred and 0.05 < p < T - STAGNATION.delta for deferred, p in read[2:])


async def test_the_same_agent_repeating_one_call_with_empty_results_is_still_caught_by_the_repeat_limit() -> None:
    same = [ToolCall("click_text", {"label": "Support services jobs in Bentonville"}, id=f"h{i}") for i in range(6)]
    async with browser() as server:
        tools = await server.list_tools()
        agent = Agent(
            "browser", "Browse and answer.", browsing(same, "done"), tools=[*tools, click_text], guardian=Guardian()
        )
        result = await Runner().run(agent, "Find a support services job in Bentonville.")
    replans = [d for d in result.decisions if d.outcome is GuardianOutcome.REPLAN]
    assert replans, [d.reason for d in result.decisions]
    first = replans[0]
    assert first.reason == "replan: the same call was made 3 times in a row"
    assert first.answers["stagnation"].defer  # the repeat limit caught it, not a reading of the empty results


@tool
def web_search(query: str) -> str:
    """Search the web."""
    return "Tram 28 - Wikipedia. The route opened in 1914 and runs 7 km from Martim Moniz to Campo de Ourique."


async def test_a_plain_loop_with_a_text_result_still_replans_on_the_stagnation_reading() -> None:
    # The query changes each time (so the repeat limit never counts), the page that comes back does not.
    calls = [ToolCall("web_search", {"query": f"tram 28 opening year {i}"}, id=f"s{i}") for i in range(6)]
    agent = Agent("a", "Answer from the web.", browsing(calls, "1914"), tools=[web_search], guardian=Guardian())
    result = await Runner().run(agent, "When did Lisbon's tram 28 open?")
    replans = [d for d in result.decisions if d.outcome is GuardianOutcome.REPLAN]
    assert replans, [d.reason for d in result.decisions]
    assert replans[0].reason.startswith("replan: stagnation p=")
    assert not replans[0].answers["stagnation"].defer


# --- what counts as no text ------------------------------------------------------------------------------------


def run_of(results: list[str], *, same_args: bool = False) -> Projection:
    steps = tuple(
        ProjectedStep(
            i + 1, "", (ProjectedCall("search", {"q": "jobs" if same_args else f"jobs {i}"}, r, error=False),)
        )
        for i, r in enumerate(results)
    )
    return Projection("Find a job.", (), steps)


IMAGE = '[{"type":"image","data":"' + "iVBORw0KGgo" * 60 + '","mimeType":"image/png"}]'
CUT_IMAGE = IMAGE[:600] + f"... [{len(IMAGE) - 600} more characters]"
ANTHROPIC_IMAGE = '{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}'


@pytest.mark.parametrize("textless", ["", "  \n\t", IMAGE, CUT_IMAGE, ANTHROPIC_IMAGE])
def test_a_window_of_textless_results_defers_at_the_base_rate(textless: str) -> None:
    base = RULES.coefficients.stagnation_unobserved
    assert base is not None
    answer = RULES.answer(run_of([textless] * 4), STAGNATION)
    assert answer.defer
    assert answer.p(STAGNATION.fires_on) == pytest.approx(base.p({}))
    assert "cannot tell" in (answer.note or "")


@pytest.mark.parametrize(
    "answered",
    [
        "[]",
        "{}",
        "No results found",
        '[{"type":"image","data":"iVBORw0K","mimeType":"image/png"},{"type":"text","text":"Page 2 of 2"}]',
    ],
)
def test_an_empty_answer_or_a_screenshot_with_text_is_read_not_deferred(answered: str) -> None:
    projection = run_of([answered] * 4, same_args=True)
    answer = RULES.answer(projection, STAGNATION)
    assert not answer.defer
    assert "unobserved" not in RULES.stagnation_features(projection)
    # The same result coming back to the same call: stuck, as the map always read it.
    assert answer.p(STAGNATION.fires_on) > T


def test_nothing_found_to_ever_new_queries_still_reads_as_stuck() -> None:
    answer = RULES.answer(run_of(["No results found"] * 4), STAGNATION)
    assert not answer.defer and answer.p(STAGNATION.fires_on) > T


def test_a_window_with_one_text_result_reads_the_text_and_skips_the_screenshots() -> None:
    # An earlier page comes back beside a screenshot: the page is read (seen before: stale), the screenshot is not.
    page = "Coordinator, Enterprise Business Services - Bentonville, AR"
    projection = run_of([page, IMAGE, page, IMAGE])
    features = RULES.stagnation_features(projection)
    assert "unobserved" not in features
    assert features["stale_results"] == 1.0 and features["all_steps_stale"] == 1.0
    assert not RULES.answer(projection, STAGNATION).defer


def test_a_pretty_printed_image_block_is_textless_too() -> None:
    pretty = '[\n  {\n    "type": "image",\n    "data": "iVBORw0KGgo",\n    "mimeType": "image/png"\n  }\n]'
    assert RULES.answer(run_of([pretty] * 4), STAGNATION).defer


def narrated(results: list[str], texts: list[str]) -> Projection:
    steps = tuple(
        ProjectedStep(i + 1, t, (ProjectedCall("find_in_page", {"text": f"coordinator {i}"}, r, error=False),))
        for i, (r, t) in enumerate(zip(results, texts, strict=True))
    )
    return Projection("Find a job.", (), steps)


SAYING = "Let me look at the page again to find the coordinator role."


@pytest.mark.parametrize("textless", ["", IMAGE])
def test_the_model_saying_the_same_words_every_step_is_read_not_deferred_though_results_are_textless(
    textless: str,
) -> None:
    projection = narrated([textless] * 4, [SAYING] * 4)
    features = RULES.stagnation_features(projection)
    assert "unobserved" not in features
    assert features["stale_text"] == 1.0 and features["all_steps_stale"] == 1.0
    answer = RULES.answer(projection, STAGNATION)
    assert not answer.defer
    assert answer.p(STAGNATION.fires_on) > T


def test_new_words_or_one_silent_step_among_textless_results_still_defers() -> None:
    # The repeat must hold for every recent step: new words, or a step without words, are no evidence of a loop.
    fresh = [f"Step {i}: scrolling to section {i} of the listing." for i in range(4)]
    assert RULES.answer(narrated([IMAGE] * 4, fresh), STAGNATION).defer
    assert RULES.answer(narrated([IMAGE] * 4, [SAYING, SAYING, "", SAYING]), STAGNATION).defer
