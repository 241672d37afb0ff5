"""JudgeEvaluator: a System 2 judge over any Model, driven here by FunctionModel and ScriptedModel."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from stopwise.errors import ConfigError, ModelError
from stopwise.guardian import DEFAULT_CONDITIONS, Choice, Condition, Evaluator, GuardianOutcome, Projection, QuestionSet
from stopwise.guardian.evaluators import JudgeEvaluator, SystemOneEvaluator
from stopwise.guardian.evaluators.judge import JUDGE_INSTRUCTIONS
from stopwise.guardian.projection import fenced, project
from stopwise.messages import Message, Reply, Role, StopReason, TokenLogprob, ToolCall
from stopwise.models import FunctionModel, ModelRequest, ScriptedModel

PROJECTION = Projection("Refund order 42", ("the refund is issued",), ())
GOAL = DEFAULT_CONDITIONS.only(["goal_reached"])
RISK = DEFAULT_CONDITIONS.only(["risk"])
"""Options read_only, reversible, irreversible, regulated: codes A, B, C, D."""
DRIFT = DEFAULT_CONDITIONS.only(["drift"])
"""Five levels: codes 0..4."""


def replying(text: str, **reply: Any) -> FunctionModel:
    return FunctionModel(lambda request: Reply(text=text, **reply), name="fn-judge")


def lp(p: float) -> float:
    return math.log(p)


# --- the request --------------------------------------------------------------------------------------------


async def test_each_question_is_one_request_without_tools() -> None:
    model = ScriptedModel(["yes 0.9"] * len(DEFAULT_CONDITIONS.conditions))
    messages = [
        Message.user("Refund order 42"),
        Message(Role.ASSISTANT, "Looking it up", [ToolCall("lookup", {"order": 42}, id="c1")]),
        Message(Role.TOOL, "order 42: paid", tool_call_id="c1"),
        Message(Role.ASSISTANT, "Refunding"),
    ]
    projection = project(messages, goal="Refund order 42")
    await JudgeEvaluator(model).evaluate(projection, DEFAULT_CONDITIONS)
    assert len(model.requests) == len(DEFAULT_CONDITIONS.conditions)
    for request in model.requests:
        assert request.tools == ()
        assert request.step == 2  # the run step the projection ends on
        system, user = request.messages
        assert (system.role, system.content) == (Role.SYSTEM, JUDGE_INSTRUCTIONS)
        assert user.role is Role.USER
        key = user.content.split("\n", 1)[0].removeprefix("FENCE KEY: ")
        assert user.content.startswith(f"FENCE KEY: {key}\n<state {key}>\n{fenced(projection, key)}\n</state {key}>\n")


async def test_the_prompt_spells_out_the_question_and_its_codes() -> None:
    prompts: list[str] = []

    def judge(request: ModelRequest) -> Reply:
        prompts.append(request.messages[1].content)
        return Reply(text="no 0.9")

    await JudgeEvaluator(FunctionModel(judge)).evaluate(PROJECTION, DEFAULT_CONDITIONS.only(["integrity"]))
    await JudgeEvaluator(FunctionModel(judge)).evaluate(PROJECTION, RISK)
    await JudgeEvaluator(FunctionModel(judge)).evaluate(PROJECTION, DRIFT)
    integrity, risk, drift = prompts
    question = DEFAULT_CONDITIONS.by_name["integrity"].question
    assert f"QUESTION: {question.instructions}" in integrity
    assert f"Answer yes when: {question.criteria_true}" in integrity  # type: ignore[union-attr]
    assert f"Answer no when: {question.criteria_false}" in integrity  # type: ignore[union-attr]
    assert "CODES: yes, no" in integrity
    assert "A = read_only: Only reads or computes; changes nothing." in risk
    assert "D = regulated: " in risk
    assert "CODES (levels, lowest first):\n0 = unrelated to the goal\n" in drift
    assert "4 = directly serves the goal" in drift
    assert integrity.endswith("Reply exactly as: <code> <probability>, for example: yes 0.7")


# --- verbalised probabilities -------------------------------------------------------------------------------


async def test_a_verbalised_yes_no_answer() -> None:
    got = await JudgeEvaluator(replying("yes 0.83")).evaluate(PROJECTION, GOAL)
    answer = got.answers["goal_reached"]
    assert dict(answer.distribution) == pytest.approx({"yes": 0.83, "no": 0.17})
    assert answer.note == "verbalised"
    assert not answer.uncertain


async def test_a_no_answer_puts_the_rest_on_yes() -> None:
    got = await JudgeEvaluator(replying("  No 0.9\n")).evaluate(PROJECTION, GOAL)
    assert got.answers["goal_reached"].p(("yes",)) == pytest.approx(0.1)


async def test_a_verbalised_choice_shares_the_rest_among_the_other_options() -> None:
    got = await JudgeEvaluator(replying("c 0.7")).evaluate(PROJECTION, RISK)
    assert dict(got.answers["risk"].distribution) == pytest.approx(
        {"read_only": 0.1, "reversible": 0.1, "irreversible": 0.7, "regulated": 0.1}
    )


async def test_a_verbalised_score() -> None:
    got = await JudgeEvaluator(replying("4 1")).evaluate(PROJECTION, DRIFT)
    assert dict(got.answers["drift"].distribution) == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0, "4": 1.0}


@pytest.mark.parametrize(
    "text",
    [
        "yes",
        "0.83",
        "yes (0.83)",
        "yes: 0.83",
        "yes  0.83",
        "yes 0.83 because the refund is issued",
        "yes 83%",
        "yes 1.2",
        "yes -0.1",
        "yes .8",
        '{"answer": "yes", "probability": 0.83}',
        "maybe 0.5",
        "E 0.5",
        "",
    ],
)
async def test_anything_but_code_space_probability_is_uncertain(text: str) -> None:
    questions = QuestionSet((*GOAL.conditions, *RISK.conditions))
    got = await JudgeEvaluator(replying(text)).evaluate(PROJECTION, questions)
    for answer in got.answers.values():
        assert answer.uncertain
        assert "is not '<code> <probability>'" in answer.note


async def test_past_26_options_the_codes_are_numbers() -> None:
    options = {f"opt{i}": f"option {i}" for i in range(1, 31)}
    many = QuestionSet((Condition("pick", Choice("Which?", options), GuardianOutcome.REPLAN, 1, 1, ("opt27",)),))
    prompts: list[str] = []

    def judge(request: ModelRequest) -> Reply:
        prompts.append(request.messages[1].content)
        # Log-probabilities would say "2", the first token of "27": they are not read for number codes.
        return Reply(text="27 0.9", logprobs=(TokenLogprob("2", lp(0.9)), TokenLogprob("7", lp(0.99))))

    got = await JudgeEvaluator(FunctionModel(judge)).evaluate(PROJECTION, many)
    assert "27 = opt27: option 27" in prompts[0]
    assert got.answers["pick"].p(("opt27",)) == pytest.approx(0.9)
    assert got.answers["pick"].note == "verbalised"


# --- token log-probabilities --------------------------------------------------------------------------------


async def test_first_token_alternatives_are_renormalised_over_the_codes() -> None:
    first = TokenLogprob("yes", lp(0.6), top=(("yes", lp(0.6)), ("Yes", lp(0.2)), ("no", lp(0.15)), ("The", lp(0.05))))
    model = replying("yes 0.99", logprobs=(first, TokenLogprob(" 0", lp(0.5))))
    got = await JudgeEvaluator(model).evaluate(PROJECTION, GOAL)
    answer = got.answers["goal_reached"]
    assert dict(answer.distribution) == pytest.approx({"yes": 0.8 / 0.95, "no": 0.15 / 0.95})
    assert answer.note == "token logprobs"  # the written 0.99 is not used when logprobs are there


async def test_logprobs_of_a_choice_map_letters_onto_labels() -> None:
    first = TokenLogprob("B", lp(0.5), top=(("B", lp(0.5)), ("A", lp(0.3)), (" D", lp(0.1)), ("b", lp(0.1))))
    got = await JudgeEvaluator(replying("B 0.5", logprobs=(first,))).evaluate(PROJECTION, RISK)
    assert dict(got.answers["risk"].distribution) == pytest.approx(
        {"read_only": 0.3, "reversible": 0.6, "irreversible": 0.0, "regulated": 0.1}
    )


async def test_blank_leading_tokens_are_skipped() -> None:
    first = TokenLogprob("3", lp(0.7), top=(("3", lp(0.7)), ("4", lp(0.2))))
    model = replying("\n3 0.7", logprobs=(TokenLogprob("\n", lp(0.99)), first))
    got = await JudgeEvaluator(model).evaluate(PROJECTION, DRIFT)
    assert got.answers["drift"].p(("3",)) == pytest.approx(0.7 / 0.9)
    assert got.answers["drift"].p(("4",)) == pytest.approx(0.2 / 0.9)


async def test_without_alternatives_the_chosen_token_probability_is_used() -> None:
    got = await JudgeEvaluator(replying("no", logprobs=(TokenLogprob("no", lp(0.9)),))).evaluate(PROJECTION, GOAL)
    assert dict(got.answers["goal_reached"].distribution) == pytest.approx({"yes": 0.1, "no": 0.9})
    assert got.answers["goal_reached"].note == "token logprobs"


@pytest.mark.parametrize(
    "logprobs",
    [
        (TokenLogprob("Sure", lp(0.9), top=(("Sure", lp(0.9)), ("yes", lp(0.05)))),),  # not a code
        (TokenLogprob("yes", math.nan),),  # not a log-probability
        (TokenLogprob("yes", lp(0.5), top=(("yes", lp(0.5)), ("no", 3.0))),),
        (TokenLogprob("yes", -math.inf, top=(("yes", -math.inf),)),),  # no probability mass on any code
        (),
    ],
)
async def test_unusable_logprobs_fall_back_to_the_text(logprobs: tuple[TokenLogprob, ...]) -> None:
    got = await JudgeEvaluator(replying("yes 0.6", logprobs=logprobs)).evaluate(PROJECTION, GOAL)
    assert got.answers["goal_reached"].p(("yes",)) == pytest.approx(0.6)
    assert got.answers["goal_reached"].note == "verbalised"


async def test_unusable_logprobs_and_text_are_uncertain() -> None:
    logprobs = (TokenLogprob("I", lp(0.9)),)
    got = await JudgeEvaluator(replying("I think yes", logprobs=logprobs)).evaluate(PROJECTION, GOAL)
    assert got.answers["goal_reached"].uncertain


# --- failures -----------------------------------------------------------------------------------------------


async def test_a_model_error_leaves_that_question_uncertain_and_the_others_answered() -> None:
    def judge(request: ModelRequest) -> Reply:
        if "Classify the effect" in request.messages[1].content:
            raise ModelError("provider answered HTTP 503", provider="openai", status=503)
        return Reply(text="yes 0.9")

    got = await JudgeEvaluator(FunctionModel(judge)).evaluate(
        PROJECTION, QuestionSet((*RISK.conditions, *GOAL.conditions))
    )
    assert got.answers["risk"].uncertain
    assert got.answers["risk"].note == "judge: the model failed on risk: ModelError: provider answered HTTP 503"
    assert got.answers["goal_reached"].p(("yes",)) == pytest.approx(0.9)


async def test_a_script_run_dry_is_uncertain() -> None:
    got = await JudgeEvaluator(ScriptedModel([])).evaluate(PROJECTION, GOAL)
    assert got.answers["goal_reached"].uncertain
    assert "ModelScriptExhausted" in got.answers["goal_reached"].note


@pytest.mark.parametrize("stop", [StopReason.REFUSAL, StopReason.CONTENT_FILTER, StopReason.ERROR])
async def test_a_reply_without_a_judgment_is_uncertain(stop: StopReason) -> None:
    got = await JudgeEvaluator(replying("yes 0.9", stop_reason=stop)).evaluate(PROJECTION, GOAL)
    assert got.answers["goal_reached"].uncertain
    assert str(stop) in got.answers["goal_reached"].note


async def test_a_tool_call_is_not_an_answer() -> None:
    model = replying("yes 0.9", tool_calls=[ToolCall("delete_everything", {})])
    got = await JudgeEvaluator(model).evaluate(PROJECTION, GOAL)
    assert got.answers["goal_reached"].uncertain
    assert "called a tool" in got.answers["goal_reached"].note


# --- the evaluator ------------------------------------------------------------------------------------------


async def test_all_questions_are_asked_concurrently() -> None:
    n = len(DEFAULT_CONDITIONS.conditions)
    arrived: list[str] = []
    everyone = asyncio.Event()

    async def judge(request: ModelRequest) -> Reply:
        arrived.append(request.messages[1].content)
        if len(arrived) == n:
            everyone.set()
        await everyone.wait()  # would never return if the questions were asked one after another
        return Reply(text="0 0.5" if "CODES (levels" in request.messages[1].content else "A 0.5")

    async with asyncio.timeout(5):
        got = await JudgeEvaluator(FunctionModel(judge)).evaluate(PROJECTION, DEFAULT_CONDITIONS)
    assert len(arrived) == n
    assert set(got.answers) == {c.name for c in DEFAULT_CONDITIONS.conditions}


async def test_scripted_replies_answer_the_questions_in_order() -> None:
    questions = DEFAULT_CONDITIONS.only(["infeasible", "goal_reached"])
    got = await JudgeEvaluator(ScriptedModel(["no 0.8", "yes 0.95"])).evaluate(PROJECTION, questions)
    assert got.answers["infeasible"].p(("yes",)) == pytest.approx(0.2)
    assert got.answers["goal_reached"].p(("yes",)) == pytest.approx(0.95)


async def test_a_single_option_choice_is_answered_without_asking() -> None:
    model = ScriptedModel([])
    only = Condition("kind", Choice("Which kind?", {"only": "the one kind"}), GuardianOutcome.REPLAN, 1, 1, ("only",))
    got = await JudgeEvaluator(model).evaluate(PROJECTION, QuestionSet((only,)))
    assert model.requests == []
    assert dict(got.answers["kind"].distribution) == {"only": 1.0}


async def test_names_and_model_versions() -> None:
    class Hosted:
        model = "gpt-judge-1"

        async def generate(self, request: ModelRequest) -> Reply:
            return Reply(text="yes 0.5")

    got = await JudgeEvaluator(replying("yes 0.5")).evaluate(PROJECTION, GOAL)
    assert (got.evaluator, got.model_version) == ("judge", "fn-judge")
    got = await JudgeEvaluator(Hosted(), name="escalation-judge").evaluate(PROJECTION, GOAL)
    assert (got.evaluator, got.model_version) == ("escalation-judge", "gpt-judge-1")
    assert JudgeEvaluator(ScriptedModel([])).model_version == "ScriptedModel"
    assert got.latency_ms >= 0


def test_both_evaluators_satisfy_the_protocol() -> None:
    assert isinstance(JudgeEvaluator(ScriptedModel([])), Evaluator)
    assert isinstance(SystemOneEvaluator(base_url="http://127.0.0.1:9", model="m"), Evaluator)


@pytest.mark.parametrize(("model", "name"), [(object(), None), (ScriptedModel([]), "")])
def test_bad_configuration_raises_config_error(model: Any, name: str | None) -> None:
    with pytest.raises(ConfigError):
        JudgeEvaluator(model, name=name)
