"""Recall quality on LoCoMo conversations: does the owner's recall find the turns that answer?

Each conversation of `--data` (LoCoMo's format, see `bench/_locomo.py`) is written into a
temporary home of its own through loopd's own session store (one boxmaker session per
LoCoMo session, the first person's turns as the owner's records and the other's as the
assistant's), as LoCoMo is evaluated and the data's README measured; `--one-home` puts
every conversation into one home instead, where the others' turns compete. On each home
memoryd runs as a child process once per `--ranking` setting (its `[recall] ranking` in
the home's memoryd.toml, memoryd restarted between settings over the same index file),
and every question of categories 1-4 about its conversations is asked through the owner's
recall (`owner_recall`, k=10, on memoryd's owner socket, as `bxctl recall` asks), timed.

Beside memoryd, over exactly the rows memoryd indexed (read from its index file), two
baselines run in this process on a table of their own: FTS5 `bm25` with the
`unicode61` tokenizer and the query of quoted terms joined by OR (what recall ranks by
without context), and the same with `porter unicode61` (stems).

A question counts at k when some of its evidence turns are among the top k hits ("any"),
and when all of them are ("all"). Printed: R@5 and R@10 any and all, R@5 any per
category, memoryd's p50/p99 per query (ms), and the run's facts (questions,
conversations, turns, machine, date, command); `--json PATH` writes the same figures.

    just bench recall-quality [--data DIR|FILE ...] [--ranking context|spec|both]
                              [--one-home] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlean
import trio

import proto
from bench import _age_home, _locomo
from bench._locomo import Conversation, Question, Scores
from bench.age import role, wait_idle
from bench.index import _pct, wait_index_ready
from bxctl._init import init_home
from loopd._sessions import SessionStore
from loopd._tools import tool_schemas
from memoryd.ranking import _tuning, function_words, query_terms, rank_context
from memoryd.ranking._query import match_string
from proto import Baseline, HitSource

DEFAULT_DATA = Path("/work/shared/data/locomo-dev")
K = 10
KS = (5, 10)
RANKINGS = ("context", "spec")
CAUGHT_UP_DEADLINE_S = 300.0

Source = tuple[str, int]
"""A hit's record: (session, record number in its log), as `HitSource` gives them."""


def say(what: str) -> None:
    """Progress, on stderr."""
    print(what, file=sys.stderr, flush=True)


# -- the home ----------------------------------------------------------------------------


def data_files(given: Sequence[Path]) -> list[Path]:
    """Every `*.json` of each directory given, and each file given, in order."""
    files: list[Path] = []
    for path in given:
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    if not files:
        raise SystemExit(f"no LoCoMo files in {', '.join(map(str, given))}")
    return files


def session_id(n: int, conversation: int, session: int) -> str:
    """The same in every run, in the sessions' order: memoryd indexes the logs in the order
    of their ids, and bm25 ties are broken by rowid (a tie at rank 5 moves R@5 by a
    question with random ids)."""
    return f"chat-{n:04d}locomo{conversation:02d}{session:03d}"


def write_home(home: Path, conversations: Sequence[Conversation]) -> dict[Source, str]:
    """A home holding every session, written by loopd's `SessionStore`; record -> dia_id."""
    init_home(home, model_url=_age_home.MODEL_URL)
    store = SessionStore(home / "sessions")
    system = (home / "config" / "system.md").read_text().rstrip("\n")
    tools = tool_schemas()
    dia_ids: dict[Source, str] = {}
    n = 0
    with _age_home._no_fsync():
        for c, conversation in enumerate(conversations):
            for locomo in conversation.sessions:
                sid = session_id(n, c, locomo.number)
                n += 1
                baseline = Baseline(
                    session=sid,
                    epoch=0,
                    created=proto.utc_stamp(locomo.started),
                    model="local",
                    system=system,
                    tools=tools,
                )
                session = store.create(sid, baseline, _age_home.ORIGIN)
                for i, record in enumerate(_locomo.session_records(conversation, locomo)):
                    session.append(record)
                    dia_ids[(sid, i)] = f"{conversation.name}/{locomo.turns[i].dia_id}"
    return dia_ids


def set_ranking(config: Path, ranking: str | None) -> None:
    """`[recall] ranking = "…"` in memoryd.toml (None: no `ranking` line, memoryd's default)."""
    lines = config.read_text().splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip() == "[recall]"), None)
    if header is None:
        lines += ["", "[recall]"]
        header = len(lines) - 1
    end = next(
        (i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")),
        len(lines),
    )
    kept = [line for line in lines[header + 1 : end] if not re.match(r"\s*ranking\s*=", line)]
    setting = [] if ranking is None else [f'ranking = "{ranking}"']
    lines[header + 1 : end] = setting + kept
    config.write_text("\n".join(lines) + "\n")


# -- memoryd -----------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexRow:
    rowid: int
    text: str
    source: HitSource
    context: str = ""
    """The message the row follows, where the index keeps it (the context ranking's)."""


def index_rows(home: Path) -> list[IndexRow]:
    """Every row of memoryd's index file, with its source (read-only, beside memoryd)."""
    index = home / "index" / "memory.sqlite3"
    conn = sqlean.connect(f"file:{index}?mode=ro", uri=True)
    try:
        columns = {str(c[1]) for c in conn.execute("PRAGMA table_info(hits)")}
        context = "h.context" if "context" in columns else "''"
        found = conn.execute(
            "SELECT s.rowid, h.text, s.kind, s.session, s.epoch, s.record, s.time, s.role, "
            f"s.class, s.untrusted, {context} FROM sources s JOIN hits h ON h.rowid = s.rowid "
            "ORDER BY s.rowid"
        ).fetchall()
    finally:
        conn.close()
    return [
        IndexRow(
            rowid=int(r[0]),
            text=str(r[1]),
            source=HitSource(
                kind=r[2],
                session=r[3],
                epoch=r[4],
                record=int(r[5]),
                time=r[6],
                role=r[7],
                class_=r[8],
                untrusted=bool(r[9]),
            ),
            context=str(r[10] or ""),
        )
        for r in found
    ]


async def owner_recall(path: Path, query: str) -> tuple[list[Source], float]:
    """The owner's recall of `query` (k=10) on memoryd's owner socket: the hits' records,
    best first, and the seconds memoryd took to answer.

    The one place that reads memoryd's answer: `owner_recall`, answered hit by hit with
    each hit's `HitSource` (what `bxctl recall` asks).
    """
    started = time.perf_counter()
    reply = await proto.call(path, proto.OwnerRecall(query=query, k=K), proto.OwnerRecalled)
    seconds = time.perf_counter() - started
    return [(hit.source.session, hit.source.record) for hit in reply.hits], seconds


@dataclass
class MemorydRun:
    ranking: str
    """The `[recall] ranking` memoryd ran with ("default" when it refused the key)."""
    hits: list[list[Source]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    note: str = ""


def run_memoryd(
    home: Path, scratch: Path, ranking: str, questions: Sequence[Question], last_session: str
) -> tuple[MemorydRun, list[IndexRow]]:
    """memoryd on `home` with `ranking`, caught up and idle, asked every question; its rows."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["BOXMAKER_HOME"] = os.fspath(home)
    config = home / "config" / "memoryd.toml"
    set_ranking(config, ranking)
    note = ""
    for setting in (ranking, None):  # None: memoryd refused the key; run as it allows
        set_ranking(config, setting)
        run = MemorydRun(setting or "default", note=note)
        say(f"memoryd ({ranking}): starting")
        ready = False
        try:
            with role("memoryd", home, env, scratch) as memoryd:
                memoryd.wait_ready()
                ready = True
                return _ask(home, memoryd.process.pid, run, questions, last_session)
        except SystemExit as exc:
            if ready or setting is None:
                raise
            note = f"memoryd refused [recall] ranking = {ranking!r} ({exc}); ran without it"
            say(note)
    raise AssertionError("unreachable")


def _ask(
    home: Path, pid: int, run: MemorydRun, questions: Sequence[Question], last_session: str
) -> tuple[MemorydRun, list[IndexRow]]:
    """memoryd (running, ready) caught up and idle, then asked every question; its rows."""
    trio.run(wait_index_ready, home)
    proto.call_blocking(
        proto.LOOP_MEMORY.default_path(home),
        proto.SessionUpdated(session=last_session),
        proto.Ok,
        deadline_s=CAUGHT_UP_DEADLINE_S,
    )
    wait_idle([pid])  # its background scans done: the timing is recall's alone
    rows = index_rows(home)
    owner = proto.OWNER_MEMORY.default_path(home)

    async def ask_all() -> None:
        await owner_recall(owner, questions[0].text)  # a first call, not counted
        for i, question in enumerate(questions, 1):
            hits, seconds = await owner_recall(owner, question.text)
            run.hits.append(hits)
            run.seconds.append(seconds)
            if i % 100 == 0 or i == len(questions):
                say(f"memoryd ({run.ranking}): {i}/{len(questions)} questions")

    trio.run(ask_all)
    return run, rows


# -- the baselines -----------------------------------------------------------------------


def direct_bm25(
    rows: Sequence[IndexRow], questions: Sequence[Question], tokenizer: str
) -> list[list[Source]]:
    """bm25 over `rows` in an FTS5 table of its own (`tokenizer`), the OR query, top 10."""
    conn = sqlean.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{tokenizer}')")
        conn.executemany(
            "INSERT INTO t (rowid, text) VALUES (?, ?)", [(r.rowid, r.text) for r in rows]
        )
        sources = {r.rowid: (r.source.session, r.source.record) for r in rows}
        ranked: list[list[Source]] = []
        for question in questions:
            terms = query_terms(question.text)
            found = (
                conn.execute(
                    "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
                    (match_string(terms), K),
                ).fetchall()
                if terms
                else []
            )
            ranked.append([sources[int(rowid)] for (rowid,) in found])
        return ranked
    finally:
        conn.close()


LEVERS: dict[str, dict[str, Any]] = {
    "context ranking in-process": {},
    "  without the session raise": {"SESSION_SHARE": 0.0},
    "  without the message followed": {"CONTEXT_WEIGHT": 0.0},
    "  with function words": {"languages": ()},
    "  without stems": {"tokenizer": "unicode61"},
}
"""The context ranking's levers, each taken out alone: memoryd's own `rank_context` run
in-process over the context index's rows (text and the message each follows)."""


def direct_context(
    rows: Sequence[IndexRow], questions: Sequence[Question], lever: dict[str, Any]
) -> list[list[Source]]:
    """`rank_context` (top 10) over `rows` in an index of its own, with `lever` applied."""
    tokenizer = lever.get("tokenizer", "porter unicode61")
    words = function_words(lever.get("languages", ("en",)))
    knobs = {k: v for k, v in lever.items() if k.isupper()}
    before = {k: getattr(_tuning, k) for k in knobs}
    conn = sqlean.connect(":memory:")
    try:
        for name, value in knobs.items():
            setattr(_tuning, name, value)
        conn.execute(
            f"CREATE VIRTUAL TABLE hits USING fts5(text, context, tokenize = '{tokenizer}')"
        )
        conn.execute("CREATE TABLE sources (rowid INTEGER PRIMARY KEY, kind TEXT, session TEXT)")
        conn.executemany(
            "INSERT INTO hits (rowid, text, context) VALUES (?, ?, ?)",
            [(r.rowid, r.text, r.context) for r in rows],
        )
        conn.executemany(
            "INSERT INTO sources VALUES (?, ?, ?)",
            [(r.rowid, r.source.kind, r.source.session) for r in rows],
        )
        sources = {r.rowid: (r.source.session, r.source.record) for r in rows}
        return [
            [sources[rowid] for rowid, _ in rank_context(conn, query_terms(q.text), K, words).rows]
            for q in questions
        ]
    finally:
        for name, value in before.items():
            setattr(_tuning, name, value)
        conn.close()


# -- the run -----------------------------------------------------------------------------

BASELINES = {"spec bm25 direct": "unicode61", "porter bm25 direct": "porter unicode61"}


@dataclass
class Found:
    """What each way of ranking found, question by question (dia_ids, best first)."""

    questions: list[Question] = field(default_factory=list)
    """Their evidence ids qualified by conversation (`26/D1:3`), as `ranked` is."""
    ranked: dict[str, list[list[str | None]]] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)
    same_as_spec: dict[str, int] = field(default_factory=dict)
    """memoryd's run -> questions whose top 10 is the spec bm25 direct query's."""
    rows: int = 0
    notes: list[str] = field(default_factory=list)


def qualified(question: Question) -> Question:
    """`question` with its evidence ids as `conversation/dia_id`."""
    evidence = tuple(f"{question.conversation}/{e}" for e in question.evidence)
    return Question(
        conversation=question.conversation,
        text=question.text,
        category=question.category,
        evidence=evidence,
    )


def measure_home(
    conversations: Sequence[Conversation], rankings: Sequence[str], into: Found
) -> None:
    """One home holding `conversations`: memoryd once per ranking, then the baselines."""
    questions = [q for c in conversations for q in c.questions]
    scratch = Path(tempfile.mkdtemp(prefix="bxr", dir="/tmp"))  # short: AF_UNIX paths
    home = scratch / "home"
    try:
        names = ", ".join(c.name for c in conversations)
        say(f"conversation(s) {names}: {sum(c.turns for c in conversations):,} turns to {home}")
        dia_ids = write_home(home, conversations)
        last_session = max(sid for sid, _ in dia_ids)

        def add(name: str, hits: list[list[Source]]) -> None:
            into.ranked.setdefault(name, []).extend(
                [dia_ids.get(h) for h in found] for found in hits
            )

        runs: list[MemorydRun] = []
        rows: list[IndexRow] = []
        context_rows: list[IndexRow] = []
        for ranking in rankings:
            run, rows = run_memoryd(home, scratch, ranking, questions, last_session)
            if ranking == "context":
                context_rows = rows
            runs.append(run)
            add(f"memoryd {run.ranking}", run.hits)
            into.seconds.setdefault(f"memoryd {run.ranking}", []).extend(run.seconds)
            if run.note and run.note not in into.notes:
                into.notes.append(run.note)
        indexed = {(r.source.session, r.source.record) for r in rows}
        if indexed != set(dia_ids):
            raise SystemExit(
                f"memoryd indexed {len(indexed):,} records, not the {len(dia_ids):,} turns written"
            )
        direct: dict[str, list[list[Source]]] = {}
        for name, tokenizer in BASELINES.items():
            direct[name] = direct_bm25(rows, questions, tokenizer)
            add(name, direct[name])
        for name, lever in LEVERS.items() if context_rows else ():
            add(name, direct_context(context_rows, questions, lever))
        for run in runs:
            same = sum(a == b for a, b in zip(run.hits, direct["spec bm25 direct"], strict=True))
            name = f"memoryd {run.ranking}"
            into.same_as_spec[name] = into.same_as_spec.get(name, 0) + same
        into.questions.extend(qualified(q) for q in questions)
        into.rows += len(rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class Row:
    name: str
    scores: Scores
    p50_ms: float | None = None
    p99_ms: float | None = None


def measure(
    conversations: Sequence[Conversation], rankings: Sequence[str], *, one_home: bool
) -> tuple[list[Row], dict[str, Any]]:
    """Each conversation in a home of its own (or all in one), measured; the table's rows
    and the run's facts."""
    if not any(c.questions for c in conversations):
        raise SystemExit("no question of categories 1-4 with evidence in the data")
    found = Found()
    for group in [list(conversations)] if one_home else [[c] for c in conversations]:
        measure_home(group, rankings, found)
    table = []
    for name, ranked in found.ranked.items():
        seconds = found.seconds.get(name)
        table.append(
            Row(
                name,
                _locomo.score(found.questions, ranked, KS),
                _pct(seconds, 0.5) * 1e3 if seconds else None,
                _pct(seconds, 0.99) * 1e3 if seconds else None,
            )
        )
    both = [found.ranked.get(f"memoryd {r}") for r in RANKINGS]
    if both[0] is not None and both[0] == both[1]:
        found.notes.append(
            "memoryd found the same top 10 for every question with either ranking: it does "
            "not rank by [recall] ranking (yet)"
        )
    facts: dict[str, Any] = {
        "questions": len(found.questions),
        "left_out": sum(c.dropped for c in conversations),
        "conversations": len(conversations),
        "homes": 1 if one_home else len(conversations),
        "sessions": sum(len(c.sessions) for c in conversations),
        "turns": sum(c.turns for c in conversations),
        "rows": found.rows,
        "same_as_spec_direct": found.same_as_spec,
        "notes": found.notes,
    }
    return table, facts


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(table: Sequence[Row], facts: dict[str, Any]) -> None:
    """The table and the run's facts, on stdout."""
    categories = "".join(f"{f'R@5 cat{c}':>10}" for c in _locomo.CATEGORIES)
    width = max(len(row.name) for row in table) + 1
    print()
    print(
        f"{'':<{width}}{'R@5 any':>9}{'R@10 any':>9}{'R@5 all':>9}{'R@10 all':>9}{categories}"
        f"{'p50 ms':>9}{'p99 ms':>9}"
    )
    for row in table:
        s = row.scores
        per = "".join(f"{_cell(s.category_any_at[c][5]):>10}" for c in _locomo.CATEGORIES)
        print(
            f"{row.name:<{width}}{_cell(s.any_at[5]):>9}{_cell(s.any_at[10]):>9}"
            f"{_cell(s.all_at[5]):>9}{_cell(s.all_at[10]):>9}{per}"
            f"{_cell(row.p50_ms, 1):>9}{_cell(row.p99_ms, 1):>9}"
        )
    counts = ", ".join(
        f"cat{c} {name} {table[0].scores.category_questions[c]}"
        for c, name in _locomo.CATEGORIES.items()
    )
    print()
    print(
        f"{facts['questions']} questions ({counts}; {facts['left_out']} left out: no evidence "
        f"id names a turn), {facts['conversations']} conversations, {facts['sessions']} "
        f"sessions, {facts['turns']:,} turns ({facts['rows']:,} index rows); "
        + ("one home" if facts["homes"] == 1 else f"a home per conversation ({facts['homes']})")
    )
    same = ", ".join(f"{name} {n}" for name, n in facts["same_as_spec_direct"].items())
    print(f"top 10 the same as spec bm25 direct's: {same} of {facts['questions']}")
    for note in facts["notes"]:
        print(f"note: {note}")
    print(
        f"machine: nproc {facts['nproc']}, Python {facts['python']}; {facts['date']}; "
        f"{facts['command']}"
    )


def _figures(table: Sequence[Row], facts: dict[str, Any]) -> dict[str, Any]:
    return {
        **facts,
        "table": {
            row.name: {
                "r_any": {str(k): v for k, v in row.scores.any_at.items()},
                "r_all": {str(k): v for k, v in row.scores.all_at.items()},
                "category_r_any": {
                    str(c): {str(k): v for k, v in per.items()}
                    for c, per in row.scores.category_any_at.items()
                },
                "p50_ms": row.p50_ms,
                "p99_ms": row.p99_ms,
            }
            for row in table
        },
    }


def main(argv: list[str]) -> None:
    """Read the conversations, measure, print the table (and write `--json`)."""
    parser = argparse.ArgumentParser(
        prog="just bench recall-quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        help=f"a LoCoMo JSON file or a directory of them; repeatable (default: {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--ranking",
        choices=[*RANKINGS, "both"],
        default="both",
        help="memoryd's [recall] ranking; both: memoryd runs once with each",
    )
    parser.add_argument(
        "--one-home",
        action="store_true",
        help="every conversation in one home (the others' turns compete); default: a home each",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    conversations = [_locomo.load(path) for path in data_files(args.data or [DEFAULT_DATA])]
    rankings = RANKINGS if args.ranking == "both" else (args.ranking,)
    table, facts = measure(conversations, rankings, one_home=args.one_home)
    facts.update(
        nproc=len(os.sched_getaffinity(0)),
        python=platform.python_version(),
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        command=shlex.join(["just", "bench", "recall-quality", *argv]),
    )
    report(table, facts)
    if args.json:
        args.json.write_text(json.dumps(_figures(table, facts), indent=2) + "\n")
