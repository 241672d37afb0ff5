"""The guardian's defaults a newcomer meets (issue 14 point 5) and the author's declared risk as a floor (issue 13
point 5): ``Guardian()`` with undeclared tools lets read-like calls run and escalates destructive-looking ones, and
no evaluator can lower a risk class the tool's author declared."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from stopwise import Agent, Reply, Runner, ScriptedModel, Tool, ToolCall, tool
from stopwise.approvals import Approve
from stopwise.errors import ConfigError
from stopwise.guardian import DEFAULT_CONDITIONS, Answer, GuardianOutcome
from stopwise.guardian.evaluators.rule import RuleCoefficients, RuleEvaluator
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.policy import PolicyInputs, ThresholdPolicy
from stopwise.guardian.projection import Projection
from stopwise.guardian.records import replay

RISK = DEFAULT_CONDITIONS.by_name["risk"]
QUIET_TURN = {
    "integrity": 0.0,
    "infeasible": 0.0,
    "goal_reached": 0.0,
    "drift": {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0, "4": 1.0},
    "stagnation": 0.0,
}


@tool
def web_search(query: str) -> str:
    """Search the web."""
    return f"3 results for {query}: Lisbon tram 28 runs from Martim Moniz to Campo de Ourique since 1914."


@tool
def fetch_url(url: str) -> str:
    """Fetch a page."""
    return "Tram 28 - Wikipedia. The route opened in 1914 and runs 7 km from Martim Moniz to Campo de Ourique."


@tool
def summarize(text: str) -> str:
    """Summarise a text."""
    return "Tram 28 opened in 1914 and runs 7 km from Martim Moniz to Campo de Ourique."


@tool
def transfer_money(account: str, amount: float) -> str:
    """Transfer money to an account."""
    return f"sent {amount} to {account}"


def p_fires(name: str, declared: str = "unknown") -> float:
    projection = Projection("g", (), (), pending=ToolCall(name, {}, id="p"), pending_risk=declared)
    return RuleEvaluator().answer(projection, RISK).p(RISK.fires_on)


# --- the newcomer's run ----------------------------------------------------------------------------------------


async def test_undeclared_read_like_tools_run_to_completion_under_the_default_guardian_with_no_approval() -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall("web_search", {"query": "Lisbon tram 28 history"}, id="c1")]),
            Reply(tool_calls=[ToolCall("fetch_url", {"url": "https://example.org/tram28"}, id="c2")]),
            Reply(tool_calls=[ToolCall("summarize", {"text": "Tram 28 page"}, id="c3")]),
            "Tram 28 opened in 1914 and runs 7 km from Martim Moniz to Campo de Ourique.",
        ]
    )
    agent = Agent(
        "newcomer", "Answer from the web.", model, tools=[web_search, fetch_url, summarize], guardian=Guardian()
    )
    result = await Runner().run(agent, "When did Lisbon's tram 28 open and how long is its route?")
    assert result.status == "completed", (result.status, [d.reason for d in result.decisions])
    assert result.pending == ()
    calls = [d for d in result.decisions if d.kind == "pre_execution"]
    assert [d.call_id for d in calls] == ["c1", "c2", "c3"]
    assert all(d.outcome is GuardianOutcome.CONTINUE for d in calls)


async def test_an_undeclared_transfer_money_call_escalates_before_it_runs_with_a_readable_reason() -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("transfer_money", {"account": "FR76", "amount": 900}, id="t1")])])
    agent = Agent("newcomer", "Pay the supplier.", model, tools=[web_search, transfer_money], guardian=Guardian())
    result = await Runner().run(agent, "Pay the supplier 900 EUR.")
    assert result.status == "suspended"
    assert [p.call_id for p in result.pending] == ["t1"]
    (decision,) = [d for d in result.decisions if d.kind == "pre_execution"]
    assert decision.outcome is GuardianOutcome.ESCALATE and decision.escalated == ("risk",)
    # The reason names the condition, its probability and the threshold it crossed.
    assert decision.reason.startswith("escalate: risk p=") and "> t*=0.05" in decision.reason
    assert "the name suggests regulated" in (decision.answers["risk"].note or "")


@pytest.mark.parametrize(
    "name",
    [
        "web_search",
        "fetch_url",
        "summarize",
        "get_weather",
        "list_files",
        "read_file",
        "search_issues",
        "lookup_customer",
        "get_commit",
        "list_labels",
        "issue_read",
    ],
)
def test_an_undeclared_read_like_name_answers_below_the_risk_band(name: str) -> None:
    assert p_fires(name) < RISK.threshold - RISK.delta


@pytest.mark.parametrize(
    "name",
    [
        "delete_file",
        "transfer_money",
        "pay_invoice",
        "send_email",
        "drop_table",
        "deploy_service",
        "get_and_delete_messages",
        "purge_cache",
        "refund_order",
        "run_script",
        "frobnicate",
    ],
)
def test_an_undeclared_destructive_looking_or_unknown_name_answers_above_the_risk_band(name: str) -> None:
    # An unknown verb (run_script, frobnicate) stays cautious by design: the name cannot vouch for it.
    assert p_fires(name) > RISK.threshold + RISK.delta


def mail_tool(name: str) -> Tool:
    """An undeclared tool of a mail client, named ``name``; it records that it ran."""

    @tool(name=name)
    def run(target: str) -> str:
        """A mail client's call."""
        ran.append(name)
        return f"{name}: done for {target}"

    return run


ran: list[str] = []


@pytest.mark.parametrize(
    "name",
    ["get_email", "find_email_address", "read_email", "search_emails", "list_messages", "get_customer"],
)
async def test_an_undeclared_tool_whose_verb_reads_runs_without_approval_whatever_noun_it_touches(name: str) -> None:
    # `email` is a destructive word for send_email; after a read verb it only names what the call reads.
    ran.clear()
    model = ScriptedModel([Reply(tool_calls=[ToolCall(name, {"target": "dana@example.org"}, id="m1")]), "Found it."])
    agent = Agent("newcomer", "Help with mail.", model, tools=[mail_tool(name)], guardian=Guardian())
    result = await Runner().run(agent, "What did Dana write last week?")
    assert result.status == "completed", (result.status, [d.reason for d in result.decisions])
    assert result.pending == () and ran == [name]


@pytest.mark.parametrize(
    ("name", "suggests"),
    [
        ("send_email", "irreversible"),
        ("delete_email", "irreversible"),
        ("forward_email", "irreversible"),
        ("transfer_money", "regulated"),
        ("drop_table", "irreversible"),
    ],
)
async def test_an_undeclared_destructive_verb_escalates_whatever_noun_it_touches(name: str, suggests: str) -> None:
    ran.clear()
    model = ScriptedModel([Reply(tool_calls=[ToolCall(name, {"target": "dana@example.org"}, id="d1")])])
    agent = Agent("newcomer", "Help with mail.", model, tools=[mail_tool(name)], guardian=Guardian())
    result = await Runner().run(agent, "Tidy up Dana's thread.")
    assert result.status == "suspended" and ran == []
    assert [p.call_id for p in result.pending] == ["d1"]
    (decision,) = [d for d in result.decisions if d.kind == "pre_execution"]
    assert decision.outcome is GuardianOutcome.ESCALATE and decision.escalated == ("risk",)
    assert decision.reason.startswith("escalate: risk p=") and "> t*=0.05" in decision.reason
    assert f"the name suggests {suggests}" in (decision.answers["risk"].note or "")


@pytest.mark.parametrize(
    "name",
    ["email_search_emails", "get_email_information_by_id", "get_merge_request", "get_post", "list_sms", "get_reply"],
)
def test_a_noun_after_a_read_verb_names_the_object_and_leaves_the_call_read_only(name: str) -> None:
    assert p_fires(name) < RISK.threshold - RISK.delta


@pytest.mark.parametrize(
    "name",
    [
        "email_user",
        "sms_customer",
        "tweet",
        "merge_pull_request",
        "check_and_merge",
        "get_and_send_email",
        "vm_lifecycle",
    ],
)
def test_a_noun_with_no_read_verb_before_it_or_after_an_and_keeps_the_call_destructive(name: str) -> None:
    # A noun used as the verb (email_user) is the action; a second clause (check_and_merge) is read on its own.
    assert p_fires(name) > RISK.threshold + RISK.delta


# --- the declared risk is a floor ------------------------------------------------------------------------------

READ_ONLY = {"read_only": 1.0, "reversible": 0.0, "irreversible": 0.0, "regulated": 0.0}


async def test_an_evaluator_answering_read_only_cannot_lower_a_tool_declared_irreversible() -> None:
    wiped: list[str] = []

    @tool(risk="irreversible")
    def wipe_disk(host: str) -> str:
        """Wipe a host's disk."""
        wiped.append(host)
        return "wiped"

    evaluator = ScriptedEvaluator([{"risk": READ_ONLY}, QUIET_TURN, QUIET_TURN])
    model = ScriptedModel([Reply(tool_calls=[ToolCall("wipe_disk", {"host": "db1"}, id="w1")]), "done"])
    agent = Agent("ops", "", model, tools=[wipe_disk], guardian=Guardian(evaluator))
    runner = Runner()
    result = await runner.run(agent, "clean db1", session_id="s")
    assert result.status == "suspended" and wiped == []
    (decision,) = [d for d in result.decisions if d.kind == "pre_execution"]
    assert decision.outcome is GuardianOutcome.ESCALATE and decision.escalated == ("risk",)
    assert decision.inputs.declared_risk == "irreversible"
    assert "irreversible, declared by the tool's author" in decision.reason
    assert "p=0.00 cannot lower it" in decision.reason
    # The record replays to the same outcome: the floor is part of the recorded inputs.
    assert replay(decision).outcome is GuardianOutcome.ESCALATE
    done = await runner.resume(agent, "s", {"w1": Approve()})
    assert done.status == "completed" and wiped == ["db1"]


def test_the_floor_holds_even_when_an_unanswered_question_would_continue() -> None:
    policy = ThresholdPolicy(on_unavailable="continue")
    unanswered = {"risk": Answer(uncertain=True, note="timed out")}
    assert policy.decide(unanswered, [RISK], PolicyInputs({})).outcome is GuardianOutcome.CONTINUE
    floored = policy.decide(unanswered, [RISK], PolicyInputs({}, declared_risk="regulated"))
    assert floored.outcome is GuardianOutcome.ESCALATE and floored.escalated == ("risk",)
    assert floored.verdicts[0].declared


def test_an_evaluator_may_raise_a_declaration_a_read_only_declaration_is_no_floor() -> None:
    policy = ThresholdPolicy()
    raised = Answer({"read_only": 0.1, "reversible": 0.0, "irreversible": 0.9, "regulated": 0.0})
    result = policy.decide({"risk": raised}, [RISK], PolicyInputs({}, declared_risk="read_only"))
    assert result.outcome is GuardianOutcome.ESCALATE and not result.verdicts[0].declared
    calm = Answer(READ_ONLY)
    assert policy.decide({"risk": calm}, [RISK], PolicyInputs({}, declared_risk="read_only")).outcome is (
        GuardianOutcome.CONTINUE
    )


def test_a_record_written_before_the_floor_existed_replays_without_one() -> None:
    inputs = PolicyInputs.from_data({"held_before": {}, "replans": 0, "repeats": 0, "budget_exhausted": None})
    assert inputs.declared_risk is None
    assert PolicyInputs.from_data(PolicyInputs({}, declared_risk="irreversible").to_data()).declared_risk == (
        "irreversible"
    )


def test_an_object_word_that_is_no_name_hint_word_is_a_config_error() -> None:
    raw = json.loads(resources.files("stopwise.guardian").joinpath("data", "rule_coefficients.json").read_text())
    raw["risk"]["object_words"] = [*raw["risk"]["object_words"], "mailbox"]
    with pytest.raises(ConfigError, match="mailbox"):
        RuleCoefficients.from_data(raw)
