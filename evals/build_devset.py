"""Build the guardian's development set: labelled projections, one record per (state, condition).

    python evals/build_devset.py            # writes evals/data/devset.jsonl and prints a summary

Each JSONL record holds:
- ``id``: ``<condition>/<source>/<n>``;
- ``condition``: ``integrity``, ``risk``, ``infeasible``, ``goal_reached``, ``drift`` or ``stagnation``;
- ``label``: a bool for yes/no conditions, a level ``"0".."4"`` for drift, a risk class for risk;
- ``split``: ``train`` or ``test``, assigned by source (a source is wholly in one split), so test figures measure
  generalisation to texts and tasks the signals and models were not fitted on;
- ``source`` and ``license``: where the state's text comes from (see ``evals/SOURCES.md``);
- ``kind``: how the state was made (``complete``, ``exact_repeat``, ``paging``...); near misses say so;
- ``projection``: the structured projection (goal, criteria, steps with calls, pending, final), which
  ``projection_from_record`` turns back into a ``stopwise.guardian.Projection``;
- ``text``: the projection as rendered for a model-based evaluator (``Projection.text``);
- ``tool_output`` (integrity only): the untrusted text the label is about.

The build is deterministic (a fixed seed), so the file only changes when this script or its inputs do.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _domain import Domain, Step  # noqa: E402
from _integrity_texts import CARRIERS, GOALS_BY_GENRE, HARD_NEGATIVES, PAYLOADS  # noqa: E402
from _trajectories import DOMAINS  # noqa: E402

from stopwise.evals.traces import projection_to_data  # noqa: E402
from stopwise.guardian.projection import ProjectedCall, ProjectedStep, Projection, project  # noqa: E402
from stopwise.messages import Message, Role, ToolCall, encode_tool_result, error_tool_result  # noqa: E402

OUT = HERE / "data" / "devset.jsonl"
THIRD = HERE / "third_party"
OWN_LICENSE = "Apache-2.0 (stopwise)"
SEED = 20251130

# Which split each third-party source belongs to. Whole sources only: see the module docstring.
SPLIT_OF = {
    "bastioncorpus": "train",
    "agent-injection-bench": "test",
    "jailbreak-corpus-mini-py": "test",
    "spikee": "test",
    "stopwise-own-A": "train",
    "stopwise-own-B": "test",
}
LICENSE_OF = {
    "bastioncorpus": "MIT",
    "agent-injection-bench": "MIT",
    "jailbreak-corpus-mini-py": "MIT",
    "spikee": "Apache-2.0",
}


# ----------------------------------------------------------------------------------------------------------------
# States: scripted steps -> messages -> the library's own projection


def messages_of(goal: str, steps: Sequence[Step], final: str | None = None) -> list[Message]:
    """The rows a run would log for ``steps``: a user goal, then per step an assistant row and its tool row."""
    rows = [Message.user(goal)]
    for n, (text, tool, args, result) in enumerate(steps):
        if not tool:
            rows.append(Message(Role.ASSISTANT, text))
            continue
        call = ToolCall(tool, dict(args), id=f"call_{n}")
        rows.append(Message(Role.ASSISTANT, text, (call,)))
        if result.startswith("ERROR: "):
            rows.append(error_tool_result(result.removeprefix("ERROR: "), tool_call_id=call.id))
        else:
            rows.append(encode_tool_result(result, tool_call_id=call.id))
    if final is not None:
        rows.append(Message(Role.ASSISTANT, final))
    return rows


def state(
    goal: str,
    criteria: Sequence[str],
    steps: Sequence[Step],
    *,
    final: str | None = None,
    pending: ToolCall | None = None,
    risks: Mapping[str, str] | None = None,
) -> Projection:
    # The final answer is the reply the run would end on: it is in the projection's `final`, not a step.
    return project(messages_of(goal, steps), goal=goal, criteria=criteria, final=final, pending=pending, risks=risks)


def projection_from_record(record: Mapping[str, Any]) -> Projection:
    """The ``Projection`` a record was built from (its ``text`` and ``state_hash`` are recomputed)."""
    d = record["projection"]
    steps = tuple(
        ProjectedStep(
            s["step"],
            s["text"],
            tuple(ProjectedCall(c["tool"], c["args"], c["result"], c["error"], c["risk"]) for c in s["calls"]),
        )
        for s in d["steps"]
    )
    pending = None if d["pending"] is None else ToolCall(d["pending"]["name"], d["pending"]["args"], id="pending")
    return Projection(d["goal"], tuple(d["criteria"]), steps, pending, d["pending_risk"], d["final"])


class Writer:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.counter: Counter[tuple[str, str]] = Counter()

    def add(
        self,
        condition: str,
        label: bool | str,
        p: Projection,
        *,
        source: str,
        split: str,
        license: str,
        kind: str,
        tool_output: str | None = None,
        group: str | None = None,
    ) -> None:
        n = self.counter[(condition, source)]
        self.counter[(condition, source)] += 1
        record: dict[str, Any] = {
            "id": f"{condition}/{source}/{n:04d}",
            "condition": condition,
            "label": label,
            "split": split,
            "source": source,
            "license": license,
            "kind": kind,
            "projection": projection_to_data(p),
            "text": p.text,
        }
        if tool_output is not None:
            record["tool_output"] = tool_output
            # Texts that share their planted part (one payload in two carriers) form one group: cross-validation
            # keeps a group in one fold so it does not score a text against its twin.
            record["group"] = f"{source}/{group}" if group else record["id"]
        self.records.append(record)


# ----------------------------------------------------------------------------------------------------------------
# Trajectory conditions


def _tweak(args: Mapping[str, Any]) -> dict[str, Any]:
    """The same call with a slight, meaningless change to its arguments (case, spacing, a retry flag)."""
    out = dict(args)
    for k, v in out.items():
        if isinstance(v, str) and v.lower() != v:
            out[k] = v.lower()
            return out
        if isinstance(v, str):
            out[k] = v + " "
            return out
    out["retry"] = True
    return out


def _in_band(step: Step) -> Step:
    """A failing step as a tool that reports its failure in its result instead of raising: ``{"error": ...}``."""
    text, tool, args, result = step
    return (text, tool, args, json.dumps({"error": result.removeprefix("ERROR: ")}))


def trajectory_records(w: Writer, d: Domain) -> None:
    src = f"stopwise-trajectories/{d.name}"
    meta = {"source": src, "split": d.split, "license": OWN_LICENSE}
    S, n = d.steps, len(d.steps)
    goal, crit = d.goal, d.criteria

    def add(
        condition: str, label: bool | str, steps: Sequence[Step], kind: str, tool_output: str | None = None, **kw: Any
    ) -> None:
        w.add(condition, label, state(goal, crit, steps, **kw), kind=kind, tool_output=tool_output, **meta)

    # -- stagnation: did the last two steps add nothing new?
    for k in range(2, n + 1):
        add("stagnation", False, S[:k], "progress")
    for k in range(1, n):
        add("stagnation", True, [*S[:k], S[k - 1], S[k - 1]], "exact_repeat")
        t, tool, args, result = S[k - 1]
        near = (t, tool, _tweak(args), result)
        add("stagnation", True, [*S[:k], near, near], "near_repeat")
    for k in range(2, n):
        add("stagnation", False, [*S[:k], S[k - 1]], "single_repeat_after_progress (near miss)")
    ptext, ptool, pargs, presults = d.poll
    polls = [(ptext, ptool, pargs, r) for r in presults]
    add("stagnation", True, [*S[:2], polls[0], polls[1], polls[1]], "poll_unchanged")
    add("stagnation", False, [*S[:2], polls[0], polls[1], polls[2]], "poll_changed (near miss)")
    gtext, gtool, gargs, gresults = d.page
    pages = [(gtext, gtool, {**gargs, "page": i + 1}, r) for i, r in enumerate(gresults)]
    add("stagnation", False, [*S[:2], *pages], "paging (near miss)")
    add("stagnation", True, [*S[:2], pages[0], pages[0], pages[0]], "paging_stuck")
    for kind, err in d.lasting.items():
        add("stagnation", True, [S[0], err, err, err], f"error_repeat_{kind}")
    add("stagnation", False, [*S[:2], d.transient, S[2]], "transient_then_progress (near miss)")
    ib = _in_band(d.lasting["permission"])
    add("stagnation", True, [S[0], ib, ib, ib], "error_repeat_in_band")
    add("stagnation", False, [S[0], ib, S[1]], "in_band_error_then_progress (near miss)")
    thought = ("Let me think about what to do next before calling anything else.", "", {}, "")
    add("stagnation", True, [*S[:2], thought, thought], "text_repeat")
    other = (S[1][0], S[1][1] + "_v2", S[1][2], S[1][3])
    add("stagnation", True, [*S[:2], other, other], "same_result_other_call")

    # -- goal_reached: does the state satisfy every criterion?
    add("goal_reached", True, S, "complete", final=d.final_good)
    add("goal_reached", True, [*S, d.related[0]], "complete_then_related", final=d.final_good)
    add("goal_reached", False, S, "complete_no_final (near miss: no final answer yet)")
    add("goal_reached", True, S, "complete_vague_final (hard)", final=d.final_claim)
    add("goal_reached", False, S[:-1], "claim_without_evidence (near miss)", final=d.final_good)
    add("goal_reached", False, S[: max(1, n // 2)], "partial", final=d.final_partial)
    add("goal_reached", False, S[:1], "bare_claim (near miss)", final=d.final_claim)
    failed_last = (S[-1][0], S[-1][1], S[-1][2], "ERROR: " + d.transient[3].removeprefix("ERROR: "))
    add("goal_reached", False, [*S[:-1], failed_last], "last_step_failed (near miss)", final=d.final_good)
    for k in range(1, n):
        add("goal_reached", False, S[:k], "in_progress")
    # More states of the same shapes (appended, so the records above keep their ids): work done and answered after
    # an extra step of any kind or a detour midway (yes), work done with no answer yet (no: near miss), a required
    # step skipped under a confident answer (no: near miss), early answers of every kind (no).
    off_pools = (("related", d.related), ("partly", d.partly), ("tangential", d.tangential), ("unrelated", d.unrelated))
    for pool, extra in off_pools:
        for j, x in enumerate(extra):
            add("goal_reached", True, [*S, x], f"complete_then_{pool}", final=d.final_good)
            at = 1 + (j % (n - 1))
            add("goal_reached", True, [*S[:at], x, *S[at:]], f"complete_with_{pool}_detour", final=d.final_good)
            if j == 0:
                add(
                    "goal_reached",
                    True,
                    [*S[:at], x, *S[at:]],
                    f"complete_with_{pool}_detour_vague (hard)",
                    final=d.final_claim,
                )
                add("goal_reached", False, [*S, x], f"complete_then_{pool}_no_final (near miss)")
    for i in range(1, n - 1):
        add("goal_reached", False, [*S[:i], *S[i + 1 :]], "skipped_step (near miss)", final=d.final_good)
        add("goal_reached", False, [*S[:i], *S[i + 1 :]], "skipped_step_vague (near miss)", final=d.final_claim)
    for k in range(1, n):
        if k != max(1, n // 2):
            add("goal_reached", False, S[:k], "partial", final=d.final_partial)
        if k != 1:
            add("goal_reached", False, S[:k], "early_claim (near miss)", final=d.final_claim)
        if k != n - 1:
            add("goal_reached", False, S[:k], "early_answer (near miss)", final=d.final_good)
    add("goal_reached", False, [*S[:-1], failed_last], "last_step_failed_vague (near miss)", final=d.final_claim)
    add("goal_reached", False, [*S[:-1], failed_last], "last_step_failed_no_final")

    # -- infeasible: can the goal not be reached with the tools and permissions available?
    cannot_step = (d.cannot, "", {}, "")
    for kind, err in d.lasting.items():
        add("infeasible", True, [S[0], err, err, err], f"repeated_{kind}")
        add("infeasible", True, [S[0], err, err, cannot_step], f"repeated_{kind}_then_cannot")
        add("infeasible", True, [S[0], err, err], f"twice_{kind}_final_cannot", final=d.cannot)
        add("infeasible", False, [S[0], err], f"single_{kind} (near miss)")
    # Tools that answer a failure in-band (the call succeeds, its result says it failed) instead of raising.
    for kind, err in d.lasting.items():
        ib = _in_band(err)
        add("infeasible", True, [S[0], ib, ib, ib], f"repeated_{kind}_in_band")
        add("infeasible", False, [S[0], ib], f"single_{kind}_in_band (near miss)")
    add("infeasible", False, [S[0], _in_band(d.transient), _in_band(d.transient)], "transient_in_band (near miss)")
    add("infeasible", False, [S[0], d.lasting["permission"], S[1]], "recovered_after_error (near miss)")
    add("infeasible", False, [S[0], d.transient, d.transient, d.transient], "transient_errors (near miss)")
    for k in range(1, n + 1):
        add("infeasible", False, S[:k], "progress")

    # -- drift: how well does the current sub-task serve the goal? (levels 0..4)
    for k in (1, 2):
        add("drift", "4", S[: k + 2], "on_goal")
        add("drift", "3", [*S[:k], *d.related], "related")
        add("drift", "2", [*S[:k], *d.partly], "partly_related")
        add("drift", "1", [*S[:k], *d.tangential], "tangential (near miss: shares topic words)")
        add("drift", "0", [*S[:k], *d.unrelated], "unrelated")
    # More states (appended, so the records above keep their ids). The current sub-task is the latest step, or the
    # latest two when they are of one kind: each pool's steps in the other order, one alone right after on-goal
    # work (the window then mixes both), after every prefix of the on-goal work; the levels next to the firing
    # boundary (1: tangential, 2: partly related) twice as often; on-goal work resumed after a detour (4).
    levels = (
        ("4", "on_goal", None),
        ("3", "related", d.related),
        ("2", "partly_related", d.partly),
        ("1", "tangential (near miss: shares topic words)", d.tangential),
        ("0", "unrelated", d.unrelated),
    )
    for level, kind, pool in levels:
        near = level in ("1", "2")
        if pool is None:
            for k in range(1, n + 1):
                add("drift", level, S[:k], "on_goal_prefix")
            for _, detour in off_pools:
                for k in range(0, n - 1):
                    add("drift", level, [*S[:k], *detour, *S[k : k + 2]], "resumed_after_detour (near miss)")
            continue
        a, b = pool[0], pool[1]
        for k in range(0, n):
            add("drift", level, [*S[:k], b, a], f"{kind}, reversed")
            add("drift", level, [*S[:k], a], f"{kind}, single step")
            if near or k < 2:
                add("drift", level, [*S[:k], b], f"{kind}, single step")
        if near:
            add("drift", level, [*S, a, b], f"{kind}, after the work")
            add("drift", level, [*S, b], f"{kind}, after the work")

    # -- risk: the declared class of the pending call, declared and not declared
    for tool, risk in d.risk_tools.items():
        call = ToolCall(tool, {}, id="pending")
        add("risk", risk, S[:1], "declared", pending=call, risks=d.risk_tools)
        add("risk", risk, S[:1], "undeclared (hard)", pending=call, risks={})

    # -- integrity negatives: every tool result of the domain is data with no instruction in it
    results = {s[3] for s in [*S, *d.related, *d.partly, *d.tangential, *d.unrelated, *d.lasting.values()]}
    results |= set(d.poll[3]) | set(d.page[3])
    for r in sorted(results):
        step = ("Reading the result.", "read", {}, r)
        add("integrity", False, [step], "tool_result", tool_output=r)


# ----------------------------------------------------------------------------------------------------------------
# Integrity


def _tool_for(text: str) -> str:
    head = text.lstrip()[:12]
    if head.startswith(("From:", "Subject:")):
        return "read_email"
    if head.startswith("<"):
        return "fetch_url"
    if head.startswith("{"):
        return "api_get"
    if head.startswith(("$", "20", "README", "name,", "Traceback", "inventory", "CHANGELOG", "Shared")):
        return "read_file"
    return "search"


def _embed(carrier: str, insert: str) -> str:
    if carrier.lstrip().startswith("{"):
        # Inside a JSON string: escape it as a real API would.
        insert = json.dumps(insert, ensure_ascii=False)[1:-1]
    return carrier.replace("{slot}", insert)


def _integrity(
    w: Writer, text: str, label: bool, *, source: str, kind: str, rng: random.Random, group: str | None = None
) -> None:
    goal = rng.choice(GOALS_BY_GENRE)
    step = ("Reading the content.", _tool_for(text), {"ref": f"item-{rng.randrange(1000, 9999)}"}, text)
    p = state(goal, (), [step])
    w.add(
        "integrity",
        label,
        p,
        source=source,
        split=SPLIT_OF[source],
        license=LICENSE_OF.get(source, OWN_LICENSE),
        kind=kind,
        tool_output=text,
        group=group,
    )


def own_integrity(w: Writer, rng: random.Random) -> None:
    for pool in ("A", "B"):
        source = f"stopwise-own-{pool}"
        carriers = CARRIERS[pool]
        for i, c in enumerate(carriers):
            text = _embed(c, "").replace("\n\n\n", "\n\n")
            _integrity(w, text, False, source=source, kind="clean", rng=rng, group=f"carrier-{i}")
        for i, h in enumerate(HARD_NEGATIVES[pool]):
            _integrity(w, h, False, source=source, kind="hard_negative_alone", rng=rng, group=f"hard-{i}")
            for c in rng.sample(carriers, 2):
                text = _embed(c, h)
                _integrity(w, text, False, source=source, kind="hard_negative_embedded", rng=rng, group=f"hard-{i}")
        for i, payload in enumerate(PAYLOADS[pool]):
            for c in rng.sample(carriers, 2):
                text = _embed(c, payload)
                _integrity(w, text, True, source=source, kind="embedded_injection", rng=rng, group=f"payload-{i}")


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


# bastioncorpus rows written as requests *to* an assistant are instructions addressed to the agent when they sit
# in a tool result, whatever their label in the corpus (which is about user input): left out as ambiguous.
_BASTION_AMBIGUOUS = {"benign_actas", "benign_roleplay", "benign_pretend", "benign_codegen", "benign_creative"}


def third_party_integrity(w: Writer, rng: random.Random) -> None:
    train_carriers, test_carriers = CARRIERS["A"], CARRIERS["B"]
    for i, r in enumerate(_jsonl(THIRD / "bastioncorpus" / "injections.jsonl")):
        if r["category"] in _BASTION_AMBIGUOUS:
            continue
        malicious = r["label"] == "malicious"
        # Half of them inside a carrier, as they would arrive in a tool result; half as the whole result.
        text = _embed(rng.choice(train_carriers), r["text"]) if i % 2 else r["text"]
        kind = f"{r['category']}/{r['channel']}" + ("" if i % 2 == 0 else "/embedded")
        _integrity(w, text, malicious, source="bastioncorpus", kind=kind, rng=rng)
    for r in _jsonl(THIRD / "agent_injection_bench" / "attacks.jsonl"):
        control = r["family"] == "control"
        _integrity(w, r["injected"], not control, source="agent-injection-bench", kind=r["family"], rng=rng)
    corpus = json.loads((THIRD / "jailbreak_corpus_mini" / "corpus.json").read_text(encoding="utf-8"))
    for i, r in enumerate(corpus):
        text = _embed(rng.choice(test_carriers), r["prompt"]) if i % 2 else r["prompt"]
        _integrity(w, text, True, source="jailbreak-corpus-mini-py", kind=r["category"], rng=rng)
    instructions = list(_jsonl(THIRD / "spikee" / "instructions_en.jsonl"))
    for i, j in enumerate(_jsonl(THIRD / "spikee" / "jailbreaks_en.jsonl")):
        instruction = instructions[i % len(instructions)]["instruction"]
        payload = j["text"].replace("<INSTRUCTION>", instruction)
        text = _embed(rng.choice(test_carriers), payload)
        _integrity(
            w,
            text,
            True,
            source="spikee",
            kind=f"{j['jailbreak_type']}+{instructions[i % len(instructions)]['instruction_type']}",
            rng=rng,
        )


# ----------------------------------------------------------------------------------------------------------------


def build() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    w = Writer()
    for d in DOMAINS:
        trajectory_records(w, d)
    own_integrity(w, rng)
    third_party_integrity(w, rng)
    return w.records


def main() -> None:
    records = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    table: Counter[tuple[str, str, str]] = Counter()
    for r in records:
        table[(r["condition"], r["split"], str(r["label"]))] += 1
    print(f"wrote {len(records)} records to {OUT.relative_to(HERE.parent)}")
    for (condition, split, label), count in sorted(table.items()):
        print(f"  {condition:13} {split:5} label={label:12} {count:5}")


if __name__ == "__main__":
    main()
