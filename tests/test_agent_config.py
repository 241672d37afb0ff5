"""Agent definitions: invalid configuration fails at definition time with a ConfigError naming the field."""

from typing import Any

import pytest
from pydantic import BaseModel

from stopwise import Agent, ConfigError, Runner, ScriptedModel, StopCondition, StopwiseError, Tool, tool


@tool
def lookup(key: str) -> str:
    """Look up a key."""
    return key


def _agent(**overrides: Any) -> Agent:
    kwargs: dict[str, Any] = {"name": "helper", "instructions": "Be helpful.", "model": ScriptedModel([])}
    kwargs.update(overrides)
    return Agent(**kwargs)


def _field_of(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as info:
        _agent(**overrides)
    return info.value.field


class Answer(BaseModel):
    value: int


def test_config_error_is_a_stopwise_error_and_a_value_error() -> None:
    err = ConfigError("max_steps", "must be positive")
    assert isinstance(err, StopwiseError)
    assert isinstance(err, ValueError)
    assert err.field == "max_steps"
    assert "max_steps" in str(err)
    assert "must be positive" in str(err)


def test_valid_agent_builds_its_tool_map_and_specs() -> None:
    agent = _agent(tools=[lookup], max_steps=3)
    assert agent.tools == (lookup,)
    assert dict(agent.tool_map) == {"lookup": lookup}
    assert agent.tool_specs == (lookup.spec,)
    assert agent.stop_condition is None
    assert agent.output_schema is None


def test_max_steps_none_disables_the_cap_and_is_accepted() -> None:
    assert _agent(max_steps=None).max_steps is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, False, "3"])
def test_invalid_max_steps_raises_config_error_naming_max_steps(bad: object) -> None:
    assert _field_of(max_steps=bad) == "max_steps"


def test_duplicate_tool_names_raise_config_error_naming_tools() -> None:
    @tool(name="lookup")
    def other(key: str) -> str:
        return key

    with pytest.raises(ConfigError, match="lookup") as info:
        _agent(tools=[lookup, other])
    assert info.value.field == "tools"


def test_plain_function_in_tools_raises_config_error_naming_tools() -> None:
    def not_decorated(x: int) -> int:
        return x

    with pytest.raises(ConfigError, match="@tool") as info:
        _agent(tools=[lookup, not_decorated])
    assert info.value.field == "tools"


def test_tools_that_is_not_a_list_raises_config_error_naming_tools() -> None:
    assert _field_of(tools=lookup) == "tools"


@pytest.mark.parametrize("bad", [5, "x", 1.0])
def test_stop_when_that_is_not_callable_raises_config_error_naming_stop_when(bad: object) -> None:
    assert _field_of(stop_when=bad) == "stop_when"


def test_stop_when_empty_list_raises_config_error_naming_stop_when() -> None:
    assert _field_of(stop_when=[]) == "stop_when"


def test_stop_when_list_containing_a_non_callable_raises_config_error() -> None:
    assert _field_of(stop_when=[lambda step: False, 3]) == "stop_when"


def test_stop_when_predicate_is_normalised_to_a_stop_condition() -> None:
    agent = _agent(stop_when=lambda step: False)
    assert isinstance(agent.stop_condition, StopCondition)


@pytest.mark.parametrize("bad", [dict, int, Answer(value=1), "Answer"])
def test_output_type_that_is_not_a_pydantic_model_class_raises_config_error(bad: object) -> None:
    assert _field_of(output_type=bad) == "output_type"


def test_output_type_pydantic_model_gives_the_agent_its_schema() -> None:
    agent = _agent(output_type=Answer)
    assert agent.output_schema is not None
    assert agent.output_schema["properties"]["value"]["type"] == "integer"


@pytest.mark.parametrize("bad", [object(), "gpt-x", None])
def test_model_without_generate_raises_config_error_naming_model(bad: object) -> None:
    assert _field_of(model=bad) == "model"


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_invalid_max_completion_retries_raises_config_error(bad: object) -> None:
    assert _field_of(max_completion_retries=bad) == "max_completion_retries"


def test_zero_completion_retries_is_accepted() -> None:
    assert _agent(output_type=Answer, max_completion_retries=0).max_completion_retries == 0


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_empty_name_raises_config_error_naming_name(bad: object) -> None:
    assert _field_of(name=bad) == "name"


def test_instructions_that_are_not_a_string_raise_config_error() -> None:
    assert _field_of(instructions=None) == "instructions"


def test_agent_as_tool_is_a_tool_with_the_agent_name_and_an_input_param() -> None:
    t = _agent(name="researcher").as_tool(risk="read_only")
    assert isinstance(t, Tool)
    assert t.name == "researcher"
    assert t.spec.parameters["required"] == ["input"]
    assert set(t.spec.parameters["properties"]) == {"input"}


def test_instructions_may_be_omitted_and_then_no_system_prompt_is_sent() -> None:
    model = ScriptedModel(["hi"])
    agent = Agent("bare", model=model)
    assert agent.instructions == ""
    result = Runner().run_sync(agent, "hello")
    assert result.ok
    assert [m.role for m in model.requests[0].messages] == ["user"]


def test_a_missing_model_raises_config_error_naming_model() -> None:
    with pytest.raises(ConfigError, match="required") as info:
        Agent("no-model", "Be helpful.")
    assert info.value.field == "model"
