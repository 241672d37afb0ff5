"""The ``Store`` protocol and the records it keeps.

The log is append-only and keyed by ``(session_id, seq)``. A step's rows, the session state after it and (on
the terminal step) the run record commit in one transaction, so a crash leaves either the whole step or none.
Many entries written at once (a fork's copy) commit in one transaction too, on a store that has ``commit_many``
(``CommitsMany``: every store of stopwise's); ``commit_many`` the function writes them on any ``Store``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from stopwise.errors import ErrorDetail, UnreadableRun
from stopwise.messages import Message, Usage
from stopwise.result import CompletionReason, RunStatus
from stopwise.storable import text_fields
from stopwise.store.retention import Expired

__all__ = [
    "CommitsMany",
    "EntryKind",
    "Fence",
    "Lease",
    "LogEntry",
    "RunRecord",
    "SessionSnapshot",
    "Store",
    "check_batch",
    "commit_many",
]


class EntryKind(StrEnum):
    INPUT = "input"
    """Rows a caller added when a run leg started (the user's input, a retry message)."""
    STEP = "step"
    """One model call and everything it caused."""
    SETTLE = "settle"
    """The rest of a step whose reply committed earlier (an ``INTENT``, or a step suspended for approval): its
    tool rows and its decision."""
    INTENT = "intent"
    """A step's reply and its planned tool calls (a ``StepIntent`` record), committed before any of them runs
    (write-ahead); the step counts as committed only with its ``SETTLE`` entry."""
    REWRITE = "rewrite"
    """The whole history, replaced (an input guardrail's rewrite): readers start over from its rows."""
    NOTE = "note"
    """Records only, no rows (an input guardrail's block)."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One committed unit of the log."""

    session_id: str
    seq: int
    """Position in the session's log, from 1, without gaps."""
    run_id: str
    step: int
    """The run's step number (1-based, across legs); 0 for an input entry."""
    kind: EntryKind
    messages: tuple[Message, ...]
    decision: Mapping[str, Any] | None = None
    """The stop decision recorded for a step: action, reason, detail."""
    usage: Usage | None = None
    forced: bool = False
    """The step was a forced-completion call."""
    records: tuple[Mapping[str, Any], ...] = ()
    """Decision records committed with this entry (guard and guardrail verdicts, receipts), as JSON data with a
    ``"type"`` key; each decider owns the typed form of its records."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """The durable record of a run: written when it starts, updated in its terminal step's transaction."""

    run_id: str
    session_id: str
    agent: str
    status: RunStatus = RunStatus.RUNNING
    """Written only by ``apply_decision`` (and read back by the stores): a new run record starts running."""
    completion_reason: CompletionReason | None = None
    error: ErrorDetail | None = None
    output: Any = None
    """The output as JSON-able data (a structured output is stored as its dump)."""
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    """Steps committed by this run across legs."""
    budget_base: int = 0
    """The step number the current leg's ``max_steps`` budget counts from; a retry after a failure moves it
    to the last committed step, so the retried leg has the full budget."""
    detail: str = ""
    report: Mapping[str, Any] = field(default_factory=dict)
    """The run's reports as JSON data (the stop guard's, guardrail records, pending approvals), so another
    process reading the run sees what its caller saw."""
    started_at: float | None = field(default=None, compare=False)
    """Unix time the store first wrote the record, as the database stores read it back (None from the memory
    store, and on a record not yet written). Never written from here: the store dates a run itself."""


# What a store's storable check must look at (see stopwise.storable): the other fields are numbers, flags, enums of
# ours and usage.
text_fields(LogEntry, "session_id", "run_id", "messages", "decision", "records")
text_fields(RunRecord, "run_id", "session_id", "agent", "error", "output", "text", "detail", "report")


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's hold on a run while it drives it: ``owner`` (free text naming the worker) until ``expires_at``
    (Unix seconds by that worker's runner clock). While it is live no other worker may continue the run."""

    run_id: str
    owner: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class Fence:
    """What a run leg's write of its run record without a step (``Store.update_run``, and ``Store.start_run`` of a
    leg that continues a run) requires of the store: the leg still holds ``lease`` (its owner's, expired or not:
    nobody took the run over) and the session's log still ends at ``last_seq`` (nobody committed a step since the
    leg's last commit, or its claim)."""

    lease: Lease
    last_seq: int


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """A session as of its last committed entry."""

    session_id: str
    entries: tuple[LogEntry, ...]
    state: Mapping[str, Any]
    last_run: RunRecord | None

    @property
    def next_seq(self) -> int:
        return self.entries[-1].seq + 1 if self.entries else 1

    def messages(self) -> list[Message]:
        """The history as the model sees it: every entry's rows, starting over at each rewrite. A write-ahead
        intent's reply joins the history with its results, right before them (the ``SETTLE`` entry of the same
        step); an intent without results is not in it."""
        intents: dict[tuple[str, int], tuple[Message, ...]] = {}
        rows: list[Message] = []
        for e in self.entries:
            if e.kind is EntryKind.REWRITE:
                rows = list(e.messages)
            elif e.kind is EntryKind.INTENT:
                intents[(e.run_id, e.step)] = e.messages
            else:
                if e.kind is EntryKind.SETTLE:
                    rows.extend(intents.pop((e.run_id, e.step), ()))
                rows.extend(e.messages)
        return rows

    def history_before(self, seq: int) -> int:
        """How many history rows the entries before ``seq`` amount to."""
        return len(SessionSnapshot(self.session_id, tuple(e for e in self.entries if e.seq < seq), {}, None).messages())


class Store(Protocol):
    """Where sessions, runs and the log live. Every method is atomic."""

    async def load_session(self, session_id: str) -> SessionSnapshot | None:
        """The session as last committed, or None when it does not exist."""
        ...

    async def start_run(
        self,
        run: RunRecord,
        entry: LogEntry | None,
        state: Mapping[str, Any],
        lease: Lease | None = None,
        fence: Fence | None = None,
    ) -> None:
        """Create or update the run record, create the session if new, and append the input entry; with
        ``lease``, the run record holds it from the same transaction on. With ``fence`` (a leg that continues a
        run on record), nothing is written unless the fence holds, as for ``update_run``: ``StepConflict``."""
        ...

    async def claim(self, run: RunRecord, last_seq: int, lease: Lease, now: float) -> None:
        """Take ``lease`` on ``run`` in one conditional update, before a worker continues the run.

        It succeeds only while the stored run still has ``run.status``, the session's log still ends at
        ``last_seq`` (nobody moved it on since the caller read it), and no other lease is live at ``now`` (none
        held, or its ``expires_at <= now``). Raises ``RunLeased`` (owner, until) when one is live, and
        ``StepConflict`` when the run or its log changed; either way nothing was written.
        """
        ...

    async def renew(self, lease: Lease) -> bool:
        """Move the lease's expiry to ``lease.expires_at`` if its owner still holds it; False when it does not."""
        ...

    async def release(self, lease: Lease) -> None:
        """Drop the lease if its owner still holds it (a no-op otherwise)."""
        ...

    async def commit(self, entry: LogEntry, state: Mapping[str, Any], run: RunRecord | None = None) -> None:
        """Append one entry with the state after it and, if given, the run record. Raises ``StepConflict``
        when ``(session_id, seq)`` is taken."""
        ...

    async def update_run(self, run: RunRecord, fence: Fence | None = None) -> None:
        """Write a run record on its own (a run that ends without a step of its own), created if new; its session
        must be on record, else ``StepConflict`` (retention deleted it) and nothing is written. With ``fence`` (a
        leg's), the stored record is updated only while it still holds the fence's lease and the log still ends at
        its ``last_seq``; else ``StepConflict`` (another worker took the run over or committed since, or the run
        was deleted) and nothing is written."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def list_runs(
        self, session_id: str, *, on_unreadable: Callable[[UnreadableRun], None] | None = None
    ) -> list[RunRecord]:
        """The session's runs, oldest first. A run record this version cannot read raises ``UnreadableRun``; with
        ``on_unreadable`` it is handed to that callback instead and left out, and the others are returned."""
        ...

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, most recently updated first (on SQLite, a session's time is its last write's to within a
        second while its state stays the same: ``store._sql.TOUCH_SECONDS``)."""
        ...

    async def suspended_runs(self) -> list[RunRecord]:
        """Every run suspended for approval, oldest first (``Runner.expire_all`` sweeps them)."""
        ...

    def iter_sessions(self, batch: int = 500) -> AsyncIterator[list[str]]:
        """Every session id, in batches of at most ``batch``, in a stable order (by key), reading one batch at a
        time: a walk over the whole database holds one batch of ids, never the whole list."""
        ...

    async def count_sessions(self) -> int:
        """How many sessions there are (for a progress bar over ``iter_sessions``)."""
        ...

    async def delete_session(self, session_id: str, *, now: float | None = None) -> bool:
        """Remove the session with all its runs and log entries, in one transaction; False when there was none.
        Its sub-agents' sessions (every session whose id starts with ``session_id + "/"``) go with it.

        Raises ``RunLeased`` (nothing removed) while a run of the session or of a sub-agent session holds a lease
        live at ``now`` (default: the store's clock). A suspended run is removed with its session, its pending
        approval with it. The database stores free the rows; SQLite gives the file's space back only on
        ``expire_sessions`` (or its ``vacuum()``), reusing the freed pages for new rows until then. See
        ``stopwise.store.retention``.
        """
        ...

    async def expire_sessions(
        self, older_than: datetime, *, dry_run: bool = False, include_suspended: bool = False, now: float | None = None
    ) -> Expired:
        """Remove every session last written before ``older_than`` (timezone-aware, else ``ConfigError``), with
        its runs and entries, in one transaction; with ``dry_run`` only count them. Sessions with a live lease are
        kept, and suspended ones unless ``include_suspended`` (both counted in the result). ``SQLiteStore`` then
        vacuums the file, giving the space back; PostgreSQL's rows are deleted (autovacuum reuses their space).
        """
        ...

    async def close(self) -> None: ...


@runtime_checkable
class CommitsMany(Protocol):
    """A store that writes many entries in one transaction. ``MemoryStore``, ``SQLiteStore`` and ``PostgresStore``
    are; a ``Store`` of your own need not be (``commit_many`` the function then writes entry by entry).

    Recognised by the method's name alone (``isinstance``): a store of your own with a ``commit_many`` of another
    meaning must rename it, and a subclass of a shipped store inherits this one, which calls neither ``start_run``
    nor ``commit`` (a fork's copy does not pass through overrides of those)."""

    async def commit_many(
        self, entries: Sequence[LogEntry], state: Mapping[str, Any], run: RunRecord, lease: Lease | None = None
    ) -> None:
        """Append ``entries`` (one session's, at consecutive seqs from its next free one) with the state after them
        and ``run``'s record, all in one transaction: every entry or none. The session is created when it is not
        on record, as ``start_run`` creates it; with ``lease``, the run record holds it from the same transaction
        on. Raises ``StepConflict`` when the first seq is not the session's next free one or an entry's run is not on
        record (nothing written), and ``ValueError`` for a batch that is empty or not one session's consecutive
        entries of ``run``'s session, or a ``lease`` of another run."""
        ...


def check_batch(entries: Sequence[LogEntry], run: RunRecord, lease: Lease | None = None) -> None:
    """``ValueError`` unless ``entries`` is a batch ``commit_many`` can write: not empty, all of ``run``'s
    session, at consecutive seqs, and ``lease`` (if given) ``run``'s."""
    if lease is not None and lease.run_id != run.run_id:
        # SQL stores would set the lease on the run it names, the memory store on ``run``: refused on both.
        raise ValueError(f"commit_many: the lease is run {lease.run_id}'s, the batch's run is {run.run_id}")
    if not entries:
        raise ValueError("commit_many: no entries to write")
    first = entries[0].seq
    for i, e in enumerate(entries):
        if e.session_id != run.session_id or e.seq != first + i:
            raise ValueError(
                f"commit_many: entry {i} is seq {e.seq} of session {e.session_id!r}; the batch must be session "
                f"{run.session_id!r}'s entries at consecutive seqs from {first}"
            )


async def commit_many(
    store: Store, entries: Sequence[LogEntry], state: Mapping[str, Any], run: RunRecord, lease: Lease | None = None
) -> None:
    """Write ``entries`` with ``state`` and ``run``'s record as ``CommitsMany.commit_many`` does: in one transaction
    on a store that has it. On a store that does not (one of your own), entry by entry, as stopwise wrote a fork
    before it had batches: ``start_run`` with the first entry when it starts the session (seq 1, holding
    ``lease``), ``commit`` for each other, the run record with the last. Cut short there, the first entries
    stay written (a fork's copy then reads as incomplete: see ``stopwise._fork.incomplete_fork``). A batch past
    seq 1 there writes no ``lease``, and its entries' runs must be on record already (the record is written last)."""
    check_batch(entries, run, lease)
    if isinstance(store, CommitsMany):
        await store.commit_many(entries, state, run, lease)
        return
    rest: Sequence[LogEntry] = entries
    if entries[0].seq == 1:
        await store.start_run(run, entries[0], state, lease)
        rest = entries[1:]
    for entry in rest:
        await store.commit(entry, state, run if entry is entries[-1] else None)
