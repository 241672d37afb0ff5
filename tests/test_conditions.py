"""stop_when conditions: each returns a reason when it fires and None otherwise; they compose."""

from typing import Any

import pytest

from stopwise import ConfigError, Message, Reply, StepView, ToolCall, tool
from stopwise.messages import encode_tool_result, error_tool_result
from stopwise.stop.conditions import StopCondition, as_condition, has_tool_call, step_count_is, text_contains


def _step(number: int = 1, text: str = "", calls: tuple[str, ...] = ()) -> StepView:
    reply = Reply(text=text, tool_calls=tuple(ToolCall(n, {}) for n in calls))
    return StepView(number=number, reply=reply, tool_results=(), messages=(Message.user("go"),))


# --- step_count_is ------------------------------------------------------------------------------------


def test_step_count_is_fires_at_and_after_n_with_a_reason() -> None:
    cond = step_count_is(3)
    assert cond(_step(2)) is None
    reason = cond(_step(3))
    assert isinstance(reason, str)
    assert "3" in reason
    assert cond(_step(4)) is not None


@pytest.mark.parametrize("bad", [0, -2, 1.5, "3", None, True])
def test_step_count_is_rejects_anything_but_a_positive_int(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        step_count_is(bad)
    assert info.value.field == "step_count_is"


# --- has_tool_call ------------------------------------------------------------------------------------


def test_has_tool_call_fires_when_a_named_tool_was_called_and_names_it() -> None:
    cond = has_tool_call("submit", "finish")
    reason = cond(_step(calls=("search", "finish")))
    assert reason is not None
    assert "finish" in reason


def test_has_tool_call_does_not_fire_for_other_tools_or_no_tools() -> None:
    cond = has_tool_call("submit")
    assert cond(_step(calls=("search",))) is None
    assert cond(_step(text="no calls")) is None


def test_has_tool_call_without_names_fires_on_any_tool() -> None:
    cond = has_tool_call()
    reason = cond(_step(calls=("anything",)))
    assert reason is not None
    assert "anything" in reason
    assert cond(_step(text="just text")) is None


def test_has_tool_call_rejects_a_name_that_is_not_a_string() -> None:
    # Passing the Tool object instead of its name would otherwise never fire, silently.
    @tool
    def submit(answer: str) -> str:
        return answer

    with pytest.raises(ConfigError):
        has_tool_call(submit)  # type: ignore[arg-type]


# --- text_contains ------------------------------------------------------------------------------------


def test_text_contains_fires_when_the_reply_text_contains_the_string() -> None:
    cond = text_contains("FINAL")
    reason = cond(_step(text="here is the FINAL answer"))
    assert reason is not None
    assert "FINAL" in reason


def test_text_contains_is_case_sensitive_and_none_when_absent() -> None:
    cond = text_contains("FINAL")
    assert cond(_step(text="final answer")) is None
    assert cond(_step(text="")) is None


@pytest.mark.parametrize("bad", ["", 5, None])
def test_text_contains_rejects_empty_or_non_string_text(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        text_contains(bad)
    assert info.value.field == "text_contains"


# --- composition --------------------------------------------------------------------------------------


def test_or_fires_when_either_side_fires() -> None:
    cond = step_count_is(5) | text_contains("DONE")
    assert isinstance(cond, StopCondition)
    assert cond(_step(1, "working")) is None
    assert "DONE" in (cond(_step(1, "DONE")) or "")
    assert "5" in (cond(_step(5, "working")) or "")


def test_and_fires_only_when_both_fire_and_its_reason_mentions_both() -> None:
    cond = step_count_is(2) & text_contains("DONE")
    assert cond(_step(1, "DONE")) is None
    assert cond(_step(2, "working")) is None
    reason = cond(_step(2, "DONE"))
    assert reason is not None
    assert "2" in reason
    assert "DONE" in reason


def test_plain_predicate_composes_on_either_side_of_or_and_and() -> None:
    def long_reply(step: StepView) -> bool:
        return len(step.reply.text) > 10

    left = long_reply | text_contains("!")
    right = text_contains("!") | long_reply
    both = long_reply & text_contains("!")
    for cond in (left, right):
        assert cond(_step(text="hi")) is None
        assert cond(_step(text="hi!")) is not None
        assert cond(_step(text="a long reply")) is not None
    assert both(_step(text="a long reply")) is None
    assert both(_step(text="a long reply!")) is not None


def test_composing_with_a_non_callable_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        step_count_is(1) | 5


# --- as_condition -------------------------------------------------------------------------------------


def test_as_condition_keeps_a_stop_condition_as_is() -> None:
    cond = text_contains("x")
    assert as_condition(cond) is cond


def test_as_condition_wraps_a_bool_predicate_with_a_reason_naming_it() -> None:
    def budget_spent(step: StepView) -> bool:
        return step.number >= 2

    cond = as_condition(budget_spent)
    assert cond(_step(1)) is None
    reason = cond(_step(2))
    assert reason is not None
    assert "budget_spent" in reason


def test_as_condition_lambda_gets_a_readable_reason() -> None:
    reason = as_condition(lambda step: True)(_step())
    assert reason is not None
    assert "<lambda>" not in reason


def test_predicate_returning_a_non_empty_string_uses_it_as_the_reason() -> None:
    cond = as_condition(lambda step: "the user said stop" if "stop" in step.reply.text else None)
    assert cond(_step(text="please stop")) == "the user said stop"
    assert cond(_step(text="go on")) is None


@pytest.mark.parametrize("falsy", [False, None, "", 0])
def test_predicate_returning_a_falsy_value_does_not_fire(falsy: object) -> None:
    assert as_condition(lambda step: falsy)(_step()) is None


def test_list_of_conditions_stops_when_any_is_true() -> None:
    cond = as_condition([lambda step: False, text_contains("DONE"), has_tool_call("finish")])
    assert cond(_step(text="working")) is None
    assert cond(_step(text="DONE")) is not None
    assert cond(_step(calls=("finish",))) is not None


def test_empty_list_raises_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        as_condition([])
    assert info.value.field == "stop_when"


@pytest.mark.parametrize("bad", [5, "x", {"a": 1}])
def test_non_callable_raises_config_error_naming_stop_when(bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        as_condition(bad)
    assert info.value.field == "stop_when"


def test_step_view_tool_names_lists_the_calls_in_order() -> None:
    assert _step(calls=("a", "b", "a")).tool_names == ("a", "b", "a")


# --- async conditions and failed calls ------------------------------------------------------------------


async def test_an_async_predicate_is_awaited_and_its_answer_used() -> None:
    async def later(step: StepView) -> bool:
        return step.number >= 2

    cond = as_condition(later)
    assert await cond.evaluate(_step(1)) is None
    assert await cond.evaluate(_step(2)) == "later returned true"


async def test_async_conditions_compose_with_sync_ones_on_either_side() -> None:
    async def never(step: StepView) -> bool:
        return False

    async def always(step: StepView) -> str:
        return "async said so"

    assert await (as_condition(never) | step_count_is(1)).evaluate(_step(1)) == "step count reached 1"
    assert await (step_count_is(1) | never).evaluate(_step(1)) == "step count reached 1"
    assert await (step_count_is(1) & always).evaluate(_step(1)) == "step count reached 1 and async said so"
    assert await (as_condition(always) & never).evaluate(_step(1)) is None
    assert await (step_count_is(5) & always).evaluate(_step(1)) is None


def test_calling_an_async_condition_synchronously_raises_instead_of_firing() -> None:
    async def later(step: StepView) -> bool:
        return False

    with pytest.raises(TypeError, match="is async"):
        as_condition(later)(_step(1))


def _step_with_result(name: str, failed: bool) -> StepView:
    call = ToolCall(name, {}, id="c1")
    row = error_tool_result("boom", tool_call_id="c1") if failed else encode_tool_result("ok", tool_call_id="c1")
    return StepView(number=1, reply=Reply(tool_calls=(call,)), tool_results=(row,), messages=())


def test_has_tool_call_does_not_fire_when_the_call_failed_unless_asked() -> None:
    """Vercel AI SDK ``hasToolCall`` / OpenAI Agents SDK ``StopAtTools``: stopwise's one rule is that a failed call
    does not stop the run by default, so the model can fix it."""
    assert has_tool_call("submit")(_step_with_result("submit", failed=True)) is None
    assert has_tool_call("submit")(_step_with_result("submit", failed=False)) == "tool 'submit' was called"
    assert has_tool_call("submit", include_failed=True)(_step_with_result("submit", failed=True)) is not None
