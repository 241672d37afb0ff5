"""Build the peers' fixture sets: the test data of mature secret and personal-data detectors, with provenance.

    python evals/extract_peer_fixtures.py --mirror /work/.mirror

``--mirror`` holds bare clones named ``<owner>+<name>/repo`` (what the search tool's ``fetch`` makes); each source
is read at the commit pinned below, so the output is the same on every run. Writes

- ``evals/data/peer_secrets.jsonl``: gitleaks' rule tests (``cmd/generate/config/rules/*.go``: each rule's true
  positives ``tps`` and false positives ``fps``), detect-secrets' plugin tests (``tests/plugins/*_test.py``:
  parametrised lines and whether the plugin must flag them) and secretlint's rule snapshots (``input*`` and
  whether ``output.json`` reports a message);
- ``--cache`` (``~/.cache/stopwise/peer_secrets_trufflehog.jsonl``, outside the repository): trufflehog's detector
  pattern tests (each case's ``input`` and whether ``want`` lists a find). trufflehog is AGPL-3.0: its strings are
  measured locally and never shipped with this repository;
- ``evals/data/peer_pii.jsonl``: presidio's recognizer tests (``presidio-analyzer/tests/test_*_recognizer.py``
  for the kinds ``block_pii`` covers: cards, US SSNs, IBANs, phone numbers) with the expected spans.

One record per test string: ``source``, ``repo``, ``commit``, ``path``, ``licence``, ``label`` (``positive``: the
peer says its detector must find something; ``negative``: must not), ``text``, ``rule`` (the peer's rule, plugin
or recognizer) and, for personal data, ``kind`` and ``spans`` (the peer's expected ``[start, end]``). In the
secrets file the text is ``text_b64`` (base64 of the UTF-8 text), so that no real-format token sits in the
repository in clear for a secret scanner to trip on.

Only literal test data is taken. Strings the peers build at run time from a generator
(gitleaks' ``secrets.NewSecret(regex)``, detect-secrets' ``randint``) are left out and counted; strings built by
concatenating literals, by ``str.format`` / ``%`` over module constants, or by gitleaks'
``utils.GenerateSampleSecret(s)(identifier, literal)`` (written here in that helper's single-line form
``<identifier>_api_token = "<secret>"``) are evaluated. Nothing is executed: Go is tokenised here, Python is read
with ``ast`` and only constants, names of module constants, ``+``, ``%``, ``*`` and ``str.format`` are evaluated.
"""

from __future__ import annotations

import argparse
import ast
import base64
import json
import random
import re
import string
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

# The regex parser behind ``re`` (``sre_parse``), to draw samples from gitleaks' generator regexes.
from re import _constants as re_constants  # type: ignore[attr-defined]
from re import _parser as re_parser  # type: ignore[attr-defined]

HERE = Path(__file__).resolve().parent

GITLEAKS = ("gitleaks/gitleaks", "b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b", "MIT")
DETECT_SECRETS = ("Yelp/detect-secrets", "5e141933554a0b74e7341841f318be21e895339c", "Apache-2.0")
PRESIDIO = ("microsoft/presidio", "0aa9f8e44275cb52c00fbbebe19168e934e1f076", "MIT")
SCRUBADUB = ("LeapBeyond/scrubadub", "53772cbef417da290d25c95373031f786ab3b5c6", "Apache-2.0")
CARD_VALIDATOR = ("braintree/card-validator", "eb213089df9993be192282564d089d378460c63a", "MIT")
SECRETLINT = ("secretlint/secretlint", "18346ba31b8173d52060b971221ab38c1943def0", "MIT")
# AGPL-3.0: its test strings are measured from a local cache outside the repository and never shipped here.
TRUFFLEHOG = ("trufflesecurity/trufflehog", "3ab759fef4bb5935d4fe9ac68b503d05346b8364", "AGPL-3.0")
TRUFFLEHOG_CACHE = Path.home() / ".cache" / "stopwise" / "peer_secrets_trufflehog.jsonl"

# presidio recognizer test files -> the PiiKind they exercise (the kinds block_pii / redact_pii cover).
PRESIDIO_FILES = {
    "presidio-analyzer/tests/test_credit_card_recognizer.py": "card",
    "presidio-analyzer/tests/test_us_ssn_recognizer.py": "ssn",
    "presidio-analyzer/tests/test_iban_recognizer.py": "iban",
    "presidio-analyzer/tests/test_phone_recognizer.py": "phone",
}


@dataclass(frozen=True)
class Fixture:
    source: str
    repo: str
    commit: str
    path: str
    licence: str
    label: str
    text: str
    rule: str
    kind: str = ""
    spans: list[list[int]] = field(default_factory=list)


class _Skip(Exception):
    """An expression that is not literal test data (a generator, a call we do not evaluate)."""


def _git(mirror: Path, repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(_clone(mirror, repo)), *args], check=True, capture_output=True, text=True
    ).stdout


def _git_bytes(mirror: Path, repo: str, *args: str) -> bytes:
    """``_git``'s output as the bytes git wrote (for a file that may not be text)."""
    return subprocess.run(["git", "-C", str(_clone(mirror, repo)), *args], check=True, capture_output=True).stdout


def _clone(mirror: Path, repo: str) -> Path:
    return mirror / repo.replace("/", "+") / "repo"


# -- Go (gitleaks) --------------------------------------------------------------------------------------------

_GO_TOKEN = re.compile(
    r'(?P<ws>\s+)|(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<str>"(?:[^"\\\n]|\\.)*")|(?P<raw>`[^`]*`)'
    r"|(?P<rune>'(?:[^'\\]|\\.)*')|(?P<ident>[A-Za-z_][\w.]*)|(?P<num>\d+(?:\.\d+)?)|(?P<op>:=|\.\.\.|[^\s\w])",
    re.S,
)
_GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "a": "\a", "b": "\b", "f": "\f"}


def _go_string(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1]
    out, i, body = [], 0, token[1:-1]
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _GO_ESCAPES:
            out.append(_GO_ESCAPES[e])
            i += 2
        elif e == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif e in "uU":
            n = 4 if e == "u" else 8
            out.append(chr(int(body[i + 2 : i + 2 + n], 16)))
            i += 2 + n
        else:
            raise _Skip(f"escape \\{e}")
    return "".join(out)


def _go_tokens(src: str) -> list[tuple[str, str]]:
    return [(m.lastgroup or "", m.group()) for m in _GO_TOKEN.finditer(src) if m.lastgroup not in ("ws", "comment")]


def _split_at(tokens: list[tuple[str, str]], separator: str) -> list[list[tuple[str, str]]]:
    """Split a token list at ``separator`` outside brackets."""
    parts: list[list[tuple[str, str]]] = [[]]
    depth = 0
    for kind, tok in tokens:
        if kind == "op" and tok in "([{":
            depth += 1
        elif kind == "op" and tok in ")]}":
            depth -= 1
        if depth == 0 and kind == "op" and tok == separator:
            parts.append([])
        else:
            parts[-1].append((kind, tok))
    return parts


def _split_args(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The arguments of a call (or elements of a list): split at top-level commas, a trailing comma dropped."""
    return [p for p in _split_at(tokens, ",") if p]


# gitleaks' pattern helpers (``cmd/generate/config/utils/patterns.go``): the character class each names.
_GO_PATTERNS = {
    "utils.Numeric": "[0-9]",
    "utils.Hex": "[a-f0-9]",
    "utils.AlphaNumeric": "[a-z0-9]",
    "utils.AlphaNumericExtendedShort": "[a-z0-9_-]",
    "utils.AlphaNumericExtended": "[a-z0-9=_\\-]",
    "utils.AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]",
}


def _sample_regex(pattern: str, rng: random.Random) -> str:
    """One string matching ``pattern`` (the simple regexes gitleaks generates its samples from: classes,
    literals, counted repeats, groups, alternations), drawn with ``rng``; ``_Skip`` for anything else."""
    try:
        parsed = re_parser.parse(pattern)
    except re.error as exc:
        raise _Skip(str(exc)) from exc

    def chars(items: list[tuple[object, object]]) -> list[str]:
        pool: list[str] = []
        for op, av in items:
            if op is re_constants.LITERAL:
                pool.append(chr(av))  # type: ignore[arg-type]
            elif op is re_constants.RANGE:
                lo, hi = av  # type: ignore[misc]
                pool.extend(chr(c) for c in range(lo, hi + 1))
            elif op is re_constants.CATEGORY and av is re_constants.CATEGORY_DIGIT:
                pool.extend("0123456789")
            elif op is re_constants.CATEGORY and av is re_constants.CATEGORY_WORD:
                pool.extend(string.ascii_letters + string.digits + "_")
            else:
                raise _Skip(f"class item {op}")
        return pool

    def emit(seq: object) -> str:
        out = []
        for op, av in seq:  # type: ignore[attr-defined]
            if op is re_constants.LITERAL:
                out.append(chr(av))
            elif op is re_constants.IN:
                out.append(rng.choice(chars(av)))
            elif op in (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT):
                low, high, sub = av
                high = low + 8 if high is re_constants.MAXREPEAT else high
                out.extend(emit(sub) for _ in range(rng.randint(low, high)))
            elif op is re_constants.SUBPATTERN:
                out.append(emit(av[-1]))
            elif op is re_constants.BRANCH:
                out.append(emit(rng.choice(av[1])))
            elif op is re_constants.AT:
                continue
            else:
                raise _Skip(f"regex op {op}")
        return "".join(out)

    return emit(parsed)


def _go_regex(tokens: list[tuple[str, str]]) -> str:
    """A regex built by gitleaks' helpers and literals (``utils.AlphaNumeric("36")``, ``"[A-Z2-7]{16}"``)."""
    out = []
    for op in _split_at(tokens, "+"):
        if len(op) == 1 and op[0][0] in ("str", "raw"):
            out.append(_go_string(op[0][1]))
        elif op and op[0][1] in _GO_PATTERNS and op[-1][1] == ")":
            (size,) = _split_args(op[2:-1])
            out.append(f"{_GO_PATTERNS[op[0][1]]}{{{_go_string(size[0][1])}}}")
        elif op and op[0][1] == "utils.Hex8_4_4_4_12":
            out.append("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        else:
            raise _Skip(" ".join(t for _, t in op)[:60])
    return "".join(out)


def _go_value(tokens: list[tuple[str, str]], rng: random.Random | None = None) -> str:
    """A Go string expression made of literals, ``+`` and gitleaks' sample helpers; ``_Skip`` otherwise. With
    ``rng``, gitleaks' generator ``secrets.NewSecret(regex)`` is evaluated too (a string drawn from the regex)."""
    out = []
    for op in _split_at(tokens, "+"):
        if len(op) == 1 and op[0][0] in ("str", "raw"):
            out.append(_go_string(op[0][1]))
        elif op and op[0][1] in ("utils.GenerateSampleSecret", "utils.GenerateSampleSecrets") and op[-1][1] == ")":
            args = _split_args(op[2:-1])
            if len(args) != 2:
                raise _Skip("helper arity")
            out.append(f'{_go_value(args[0], rng)}_api_token = "{_go_value(args[1], rng)}"')
        elif rng is not None and op and op[0][1] == "secrets.NewSecret" and op[-1][1] == ")":
            out.append(_sample_regex(_go_regex(op[2:-1]), rng))
        else:
            raise _Skip(" ".join(t for _, t in op)[:60])
    return "".join(out)


def _go_elements(tokens: list[tuple[str, str]], at: int) -> tuple[list[list[tuple[str, str]]], int]:
    """The elements of the expression starting at ``tokens[at]`` (a ``[]string{...}``, an ``append(x, ...)``
    or a single call), and where it ends."""
    typed = [t for _, t in tokens[at : at + 3]] == ["[", "]", "string"]
    depth, end = 0, at + 3 if typed else at
    while end < len(tokens):
        kind, tok = tokens[end]
        if kind == "op" and tok in "([{":
            depth += 1
        elif kind == "op" and tok in ")]}":
            depth -= 1
            if depth == 0:
                end += 1
                break
        end += 1
    expr = tokens[at:end]
    if typed:
        return _split_args(expr[4:-1]), end
    if expr and expr[0][1] == "append":
        args = _split_args(expr[2:-1])[1:]
        return [[t for t in a if t[1] != "..."] for a in args], end
    return [expr], end


def gitleaks_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    repo, commit, licence = GITLEAKS
    files = [
        p
        for p in _git(mirror, repo, "ls-tree", "--name-only", commit, "cmd/generate/config/rules/").split()
        if p.endswith(".go") and not p.endswith("_test.go")
    ]
    generated: Counter[tuple[str, str]] = Counter()
    for path in files:
        tokens = _go_tokens(_git(mirror, repo, "show", f"{commit}:{path}"))
        rule = ""
        i = 0
        while i < len(tokens):
            kind, tok = tokens[i]
            if tok == "RuleID" and tokens[i + 1][1] == ":" and tokens[i + 2][0] == "str":
                rule = _go_string(tokens[i + 2][1])
            if kind == "ident" and tok in ("tps", "fps") and i + 1 < len(tokens) and tokens[i + 1][1] in ("=", ":="):
                label = "positive" if tok == "tps" else "negative"
                elements, i = _go_elements(tokens, i + 2)
                for element in elements:
                    try:
                        yield Fixture("gitleaks", repo, commit, path, licence, label, _go_value(element), rule)
                        continue
                    except _Skip:
                        pass
                    # Built by gitleaks' generator: drawn here from the same regex, seeded by place.
                    rng = random.Random(f"{path}:{rule}:{label}:{generated[rule, label]}")
                    generated[rule, label] += 1
                    try:
                        text = _go_value(element, rng)
                    except _Skip:
                        left_out[f"gitleaks {label}: built by code other than literals and secrets.NewSecret"] += 1
                        continue
                    yield Fixture("gitleaks-generated", repo, commit, path, licence, label, text, rule)
                continue
            i += 1


# -- Go (trufflehog) -------------------------------------------------------------------------------------------

_GO_VERB = re.compile(r"%(?:%|[-+# 0]*\d*(?:\.\d+)?[svdq])")


def _go_sprintf(template: str, args: list[str]) -> str:
    """``fmt.Sprintf`` for the verbs the tests use (``%s``, ``%v``, ``%d``, ``%q``, ``%%``); ``_Skip`` for others
    (indexed arguments, widths that pad) or a count that does not match."""
    out, at, used = [], 0, 0
    for m in _GO_VERB.finditer(template):
        out.append(template[at : m.start()])
        at = m.end()
        verb = m.group()
        if verb == "%%":
            out.append("%")
            continue
        if len(verb) != 2 or used >= len(args):
            raise _Skip(f"verb {verb}")
        out.append(f'"{args[used]}"' if verb == "%q" else args[used])
        used += 1
    if "%" in template[at:] or used != len(args):
        raise _Skip("sprintf arguments")
    out.append(template[at:])
    return "".join(out)


def _go_operand_end(tokens: list[tuple[str, str]], at: int) -> int:
    """Where the operand starting at ``tokens[at]`` ends: a literal, a name, or a name called (``f(...)``)."""
    end = at + 1
    if end < len(tokens) and tokens[at][0] == "ident" and tokens[end][1] == "(":
        depth = 0
        while end < len(tokens):
            tok = tokens[end][1]
            depth += tok in "([{" and tokens[end][0] == "op"
            depth -= tok in ")]}" and tokens[end][0] == "op"
            end += 1
            if depth == 0:
                break
    return end


def _go_expr_end(tokens: list[tuple[str, str]], at: int) -> int:
    """Where the string expression starting at ``tokens[at]`` (operands joined by ``+``) ends."""
    end = _go_operand_end(tokens, at)
    while end + 1 < len(tokens) and tokens[end] == ("op", "+"):
        end = _go_operand_end(tokens, end + 1)
    return end


def _go_eval(tokens: list[tuple[str, str]], names: dict[str, str]) -> str:
    """A string expression of literals, names of strings set before, ``+`` and ``fmt.Sprintf``; ``_Skip``
    otherwise (``strings.Repeat``, a helper of the test's own)."""
    out = []
    for op in _split_at(tokens, "+"):
        if len(op) == 1 and op[0][0] in ("str", "raw"):
            out.append(_go_string(op[0][1]))
        elif len(op) == 1 and op[0][0] == "ident" and op[0][1] in names:
            out.append(names[op[0][1]])
        elif op and op[0][1] == "fmt.Sprintf" and op[-1][1] == ")":
            args = [_go_eval(a, names) for a in _split_args(op[2:-1])]
            if not args:
                raise _Skip("empty Sprintf")
            out.append(_go_sprintf(args[0], args[1:]))
        else:
            raise _Skip(" ".join(t for _, t in op)[:60])
    return "".join(out)


def _go_element_bounds(tokens: list[tuple[str, str]], at: int) -> tuple[int, int]:
    """The ``{`` and ``}`` of the composite literal element holding ``tokens[at]``."""
    depth, start = 0, at
    while start > 0:
        start -= 1
        kind, tok = tokens[start]
        if kind == "op" and tok in ")]}":
            depth += 1
        elif kind == "op" and tok in "([{":
            if depth == 0:
                break
            depth -= 1
    depth, end = 0, at
    while end < len(tokens):
        kind, tok = tokens[end]
        if kind == "op" and tok in "([{":
            depth += 1
        elif kind == "op" and tok in ")]}":
            if depth == 0:
                break
            depth -= 1
        end += 1
    return start, end


def _go_want(tokens: list[tuple[str, str]]) -> bool | None:
    """Whether a test case's ``want:`` expects a find: ``[]string{...}`` (or a slice of results) with elements;
    ``nil`` or an empty slice expects none; None for anything else."""
    if [t for _, t in tokens] == ["nil"]:
        return False
    if len(tokens) >= 4 and tokens[0][1] == "[" and tokens[1][1] == "]":
        brace = next((i for i, (_, t) in enumerate(tokens) if t == "{"), None)
        if brace is not None and tokens[-1][1] == "}":
            return bool(_split_args(tokens[brace + 1 : -1]))
    return None


def trufflehog_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    """The pattern tests of trufflehog's detectors (``pkg/detectors/**/<name>_test.go``, integration tests left
    out): each test case's ``input`` and whether its ``want`` lists a find. Inputs are evaluated from literals,
    strings the file set before (``validPattern``, ``keyword``), ``+`` and ``fmt.Sprintf``."""
    repo, commit, licence = TRUFFLEHOG
    files = [
        p
        for p in _git(mirror, repo, "ls-tree", "-r", "--name-only", commit, "pkg/detectors/").split()
        if p.endswith("_test.go") and not p.endswith("_integration_test.go")
    ]
    seen: set[tuple[str, str]] = set()
    for path in files:
        try:
            tokens = _go_tokens(_git(mirror, repo, "show", f"{commit}:{path}"))
        except (subprocess.CalledProcessError, UnicodeDecodeError):
            continue
        rule = path.removeprefix("pkg/detectors/").rsplit("/", 1)[0]
        names: dict[str, str] = {}
        i = 0
        while i < len(tokens):
            kind, tok = tokens[i]
            nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
            if kind == "ident" and nxt in ("=", ":=") and i + 2 < len(tokens):
                end = _go_expr_end(tokens, i + 2)
                try:
                    names[tok] = _go_eval(tokens[i + 2 : end], names)
                except _Skip:
                    names.pop(tok, None)
                i = end
                continue
            if kind == "ident" and tok == "input" and nxt == ":" and i + 2 < len(tokens):
                end = _go_expr_end(tokens, i + 2)
                start, close = _go_element_bounds(tokens, i)
                element = tokens[start + 1 : close]
                want = None
                for j, (k, t) in enumerate(element):
                    if k == "ident" and t == "want" and j + 1 < len(element) and element[j + 1][1] == ":":
                        value = next(iter(_split_args(element[j + 2 :])), [])
                        want = _go_want(value)
                try:
                    text = _go_eval(tokens[i + 2 : end], names)
                except _Skip:
                    left_out["trufflehog: an input built by code other than literals and fmt.Sprintf"] += 1
                    i = end
                    continue
                i = end
                if want is None:
                    left_out["trufflehog: a case without a want of []string / nil"] += 1
                    continue
                label = "positive" if want else "negative"
                if (text, label) in seen:
                    continue
                seen.add((text, label))
                yield Fixture("trufflehog", repo, commit, path, licence, label, text, rule)
                continue
            i += 1


# -- secretlint ------------------------------------------------------------------------------------------------

# secretlint rules that are not secret formats: a file kind or path (home directories, ``.env`` files,
# Kubernetes ``kind: Secret``), comment directives, user-written patterns, the example rule.
SECRETLINT_NOT_FORMATS = (
    "no-homedir",
    "no-dotenv",
    "no-k8s-kind-secret",
    "filter-comments",
    "pattern",
    "example",
)


def secretlint_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    """The snapshot tests of secretlint's rules (``packages/@secretlint/secretlint-rule-*/test/snapshots/<case>/``):
    the ``input*`` file and whether ``output.json`` reports a message. The presets' copies of the same snapshots
    are left out, and so are snapshots with their own ``.secretlintrc.json`` (the options, such as ``allows``,
    decide their label) and binary inputs (PKCS#12 files)."""
    repo, commit, licence = SECRETLINT
    files = _git(mirror, repo, "ls-tree", "-r", "--name-only", "-z", commit, "packages/@secretlint/").split("\0")
    cases: dict[str, set[str]] = {}
    for p in files:
        m = re.fullmatch(r"(packages/@secretlint/secretlint-rule-([\w\-]+)/test/snapshots/[^/]+)/([^/]+)", p)
        if m is not None:
            cases.setdefault(m.group(1), set()).add(m.group(3))
    seen: set[tuple[str, str]] = set()
    for case, names in sorted(cases.items()):
        rule = case.split("secretlint-rule-", 1)[1].split("/", 1)[0]
        if rule.startswith("preset-") or rule in SECRETLINT_NOT_FORMATS:
            continue
        inputs = sorted(n for n in names if n == "input" or n.startswith("input."))
        if "output.json" not in names or len(inputs) != 1:
            continue
        if ".secretlintrc.json" in names:
            left_out["secretlint: a snapshot with its own options (.secretlintrc.json)"] += 1
            continue
        path = f"{case}/{inputs[0]}"
        raw = _git_bytes(mirror, repo, "show", f"{commit}:{path}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            left_out["secretlint: a binary input (PKCS#12)"] += 1
            continue
        output = json.loads(_git(mirror, repo, "show", f"{commit}:{case}/output.json"))
        label = "positive" if output.get("messages") else "negative"
        if (text, label) in seen:
            continue
        seen.add((text, label))
        yield Fixture("secretlint", repo, commit, path, licence, label, text, rule)


# -- Python (detect-secrets, presidio) -------------------------------------------------------------------------


def _py_eval(node: ast.expr, names: dict[str, object]) -> object:
    """Constants, tuples/lists, module constants, ``+ % *`` and ``str.format``; ``_Skip`` for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_py_eval(e, names) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _py_eval(node.operand, names)
        if isinstance(value, int | float):
            return -value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod | ast.Mult):
        left, right = _py_eval(node.left, names), _py_eval(node.right, names)
        try:
            if isinstance(node.op, ast.Add):
                return left + right  # type: ignore[operator]
            if isinstance(node.op, ast.Mod):
                return left % right  # type: ignore[operator]
            return left * right  # type: ignore[operator]
        except TypeError as exc:
            raise _Skip(str(exc)) from exc
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and all(k.arg for k in node.keywords)
    ):
        template = _py_eval(node.func.value, names)
        if isinstance(template, str):
            kwargs = {str(k.arg): _py_eval(k.value, names) for k in node.keywords}
            return template.format(*(_py_eval(a, names) for a in node.args), **kwargs)
    raise _Skip(ast.dump(node)[:60])


def _module_constants(tree: ast.Module) -> dict[str, object]:
    names: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            try:
                names[stmt.targets[0].id] = _py_eval(value, names)
            except _Skip:
                # A list of cases with a few generated ones: keep the literal ones.
                if isinstance(value, ast.List | ast.Tuple):
                    kept = []
                    for e in value.elts:
                        try:
                            kept.append(_py_eval(e, names))
                        except _Skip:
                            kept.append(_SKIPPED)
                    names[stmt.targets[0].id] = tuple(kept)
    return names


_SKIPPED = object()


def _parametrize_cases(tree: ast.Module, names: dict[str, object]) -> Iterator[tuple[list[str], object, str]]:
    """(argument names, one case or ``_SKIPPED``, the test function) for each ``pytest.mark.parametrize``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize" and deco.args):
                continue
            argnames = _py_eval(deco.args[0], names)
            params = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(argnames)  # type: ignore[arg-type]
            cases_node = deco.args[1]
            if isinstance(cases_node, ast.List | ast.Tuple):
                for e in cases_node.elts:
                    try:
                        yield params, _py_eval(e, names), node.name
                    except _Skip:
                        yield params, _SKIPPED, node.name
            else:
                try:
                    cases = _py_eval(cases_node, names)
                except _Skip:
                    continue
                for case in cases:  # type: ignore[union-attr]
                    yield params, case, node.name


def detect_secrets_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    repo, commit, licence = DETECT_SECRETS
    files = [
        p
        for p in _git(mirror, repo, "ls-tree", "--name-only", commit, "tests/plugins/").split()
        if p.endswith("_test.py") and p != "tests/plugins/base_test.py"
    ]
    seen: set[tuple[str, str]] = set()
    for path in files:
        tree = ast.parse(_git(mirror, repo, "show", f"{commit}:{path}"))
        names = _module_constants(tree)
        plugin = path.rsplit("/", 1)[1].removesuffix("_test.py")
        for params, case, _test in _parametrize_cases(tree, names):
            if case is _SKIPPED:
                left_out["detect-secrets: a case built at run time (randint, a fixture)"] += 1
                continue
            values = dict(zip(params, case if isinstance(case, tuple) else (case,), strict=False))
            text = next((values[p] for p in params if p in ("payload", "line", "content", "token")), None)
            if text is None or not isinstance(text, str):
                continue
            if params == ["line"]:
                positive = True  # the slack test asserts one find on each line
            elif "should_flag" in values:
                positive = bool(values["should_flag"])
            elif "expected_secret" in values or "expected" in values:
                positive = (values.get("expected_secret", values.get("expected"))) is not None
            else:
                left_out[f"detect-secrets: {plugin}: no expected flag in {params}"] += 1
                continue
            label = "positive" if positive else "negative"
            if (text, label) in seen:
                continue  # the keyword plugin repeats one line for each file type
            seen.add((text, label))
            yield Fixture("detect-secrets", repo, commit, path, licence, label, text, plugin)


def presidio_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    repo, commit, licence = PRESIDIO
    for path, kind in PRESIDIO_FILES.items():
        tree = ast.parse(_git(mirror, repo, "show", f"{commit}:{path}"))
        names = _module_constants(tree)
        for params, case, test in _parametrize_cases(tree, names):
            if case is _SKIPPED or not isinstance(case, tuple):
                left_out["presidio: a case built at run time"] += 1
                continue
            values = dict(zip(params, case, strict=False))
            if "iban" in values:
                values["text"] = values["iban"]
            if "text" not in values or "expected_len" not in values:
                continue
            spans = next((values[p] for p in ("expected_res", "expected_positions") if p in values), ())
            span_list = [[int(s), int(e)] for s, e, *_ in spans] if spans else []  # type: ignore[union-attr]
            label = "positive" if int(values["expected_len"]) > 0 else "negative"  # type: ignore[call-overload]
            yield Fixture("presidio", repo, commit, path, licence, label, str(values["text"]), test, kind, span_list)


# scrubadub test file -> (the placeholder its cleaner writes for the kind, the PiiKind).
SCRUBADUB_FILES = {
    "tests/test_detector_credit_card.py": ("{{CREDIT_CARD}}", "card"),
    "tests/test_detector_en_US_social_security_number.py": ("{{SOCIAL_SECURITY_NUMBER}}", "ssn"),
    "tests/test_detector_phone_numbers.py": ("{{PHONE}}", "phone"),
}


def _before_after_spans(before: str, after: str, placeholder: str) -> list[list[int]] | None:
    """Where ``after`` replaced text of ``before`` by ``placeholder``; None when the two do not line up."""
    parts = [re.escape(p) for p in after.split(placeholder)]
    m = re.fullmatch("(.+?)".join(parts), before, re.S)
    if m is None:
        return None
    return [[m.start(g), m.end(g)] for g in range(1, len(parts))]


def scrubadub_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    """The ``BEFORE:`` / ``AFTER:`` docstrings of scrubadub's detector tests (and ``check_phone_numbers``'s
    literal arguments, written into the docstring that test builds): positive where AFTER has the kind's
    placeholder."""
    repo, commit, licence = SCRUBADUB
    for path, (placeholder, kind) in SCRUBADUB_FILES.items():
        tree = ast.parse(_git(mirror, repo, "show", f"{commit}:{path}"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            pairs: list[tuple[str, str]] = []
            doc = ast.get_docstring(node, clean=False) or ""
            if "BEFORE:" in doc and "AFTER:" in doc:
                before, after = doc.split("BEFORE:")[1].split("AFTER:")
                pairs.append((before.strip(), after.strip()))
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "check_phone_numbers":
                    for a in call.args:
                        if isinstance(a, ast.Constant) and isinstance(a.value, str):
                            pairs.append((f"My phone number is {a.value}", "My phone number is {{PHONE}}"))
            for before, after in pairs:
                spans = _before_after_spans(before, after, placeholder)
                if spans is None and placeholder in after:
                    left_out["scrubadub: BEFORE and AFTER do not line up"] += 1
                    continue
                label = "positive" if spans else "negative"
                yield Fixture("scrubadub", repo, commit, path, licence, label, before, node.name, kind, spans or [])


_CARD_CASE = re.compile(r'\[\s*"(?P<number>[^"]*)",(?:\s*//[^\n]*)?\s*\{[^}]*?isValid:\s*(?P<valid>true|false)[^}]*\}')


def card_validator_fixtures(mirror: Path, left_out: Counter[str]) -> Iterator[Fixture]:
    """The ``[number, {card, isPotentiallyValid, isValid}]`` table of card-validator's ``card-number`` test: a
    number it calls valid is a positive; an invalid one with 12 digits or more (a shorter one cannot be a card
    and tells nothing) a negative."""
    repo, commit, licence = CARD_VALIDATOR
    path = "src/__tests__/card-number.ts"
    seen: set[str] = set()
    for m in _CARD_CASE.finditer(_git(mirror, repo, "show", f"{commit}:{path}")):
        number, valid = m.group("number"), m.group("valid") == "true"
        if number in seen:
            continue
        seen.add(number)
        if not valid and sum(c.isdigit() for c in number) < 12:
            left_out["card-validator: an invalid partial number (under 12 digits)"] += 1
            continue
        label = "positive" if valid else "negative"
        spans = [[0, len(number)]] if valid else []
        yield Fixture("card-validator", repo, commit, path, licence, label, number, "cardNumber", "card", spans)


def without_cross_rule_negatives(fixtures: list[Fixture], left_out: Counter[str]) -> list[Fixture]:
    """gitleaks (and trufflehog) list as one rule's false positive a string another rule of theirs lists as a true
    positive (an Anthropic admin key is not an API key, but it is a secret): for a redactor of every format that
    string is a positive, so it is not kept as a negative."""
    positives = {(fx.source, fx.text) for fx in fixtures if fx.label == "positive"}
    kept = []
    for fx in fixtures:
        if fx.source in ("gitleaks", "trufflehog") and fx.label == "negative" and (fx.source, fx.text) in positives:
            left_out[f"{fx.source} negative: another rule's true positive"] += 1
            continue
        kept.append(fx)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=HERE / "data")
    parser.add_argument(
        "--cache", type=Path, default=TRUFFLEHOG_CACHE, help="where trufflehog's strings go (outside the repository)"
    )
    args = parser.parse_args()
    left_out: Counter[str] = Counter()
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    for out, fixtures in (
        (
            args.out / "peer_secrets.jsonl",
            without_cross_rule_negatives(
                [
                    *gitleaks_fixtures(args.mirror, left_out),
                    *detect_secrets_fixtures(args.mirror, left_out),
                    *secretlint_fixtures(args.mirror, left_out),
                ],
                left_out,
            ),
        ),
        (args.cache, without_cross_rule_negatives(list(trufflehog_fixtures(args.mirror, left_out)), left_out)),
        (
            args.out / "peer_pii.jsonl",
            [
                *presidio_fixtures(args.mirror, left_out),
                *scrubadub_fixtures(args.mirror, left_out),
                *card_validator_fixtures(args.mirror, left_out),
            ],
        ),
    ):
        with out.open("w", encoding="utf-8") as f:
            for fx in fixtures:
                record = asdict(fx)
                if out.name != "peer_pii.jsonl":
                    # Real-format tokens in clear would trip the secret scanners of whoever hosts a copy.
                    record["text_b64"] = base64.b64encode(record.pop("text").encode()).decode()
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        counts = Counter((fx.source, fx.label) for fx in fixtures)
        print(out, dict(counts))
    for why, n in left_out.most_common():
        print(f"left out {n}: {why}")


if __name__ == "__main__":
    main()
