"""memoryd's recall index beside raw sqlean, at one size or along a curve of sizes, for
each of recall's two rankings (`[recall] ranking` in memoryd.toml: "context", the
default, and "spec").

Synthetic session logs (bench/corpus.py: English-like text, Zipf vocabulary, fixed seed)
are written once per size to a temporary home. Each ranking gets a home of its own whose
logs are hard links to that corpus (the logs (c) appends to are copies), and memoryd runs
as a child process on it with that ranking set. Printed side by side, with the ratio and
the issue's target:

(a) a full `reindex` through the admin socket (read every log, build a new file, swap it
    in) in records/s and rows/s, against the raw bulk insert of the same rows into the
    same schema (`memoryd._store.schema(ranking)`; one transaction, WAL,
    synchronous=NORMAL; the rows already in memory; for the context ranking each row
    with the message it follows, `Row.context`); and the size of both files, and of the
    context index against the spec's;
(b) recall p50/p99 through memoryd's broker socket (k=10, the whole answer: snippets,
    labels, the recall log), for content-word queries and for natural-language questions
    full of common words, against the ranking's query run directly on the same file:
    for the spec's ranking its naive query (rank in the FTS table, join `sources` for the
    10 winners), and how often memoryd's ranking, run in-process, gives its top 10; for
    the context ranking its FTS5 query (the query's content words, `bm25(hits, 1.0,
    0.5)`, the best 50), and how often memoryd's top 10 (the owner's recall) is
    `rank_context`'s, run in-process;
(c) `session_updated` for one turn (5 records, 5 rows) appended to a log,
    against the raw insert of those rows into a copy of the index; and memory_block p99.

Several sizes (`--records 100000,1000000,3000000,10000000`) are run one after the other,
each from its own corpus, and the curve is printed at the end, each ranking on a line of
its own with the machine's load average beside it: other work on the machine moves every
figure.

    just bench index [--records N[,N...]] [--ranking context|spec|both] [--queries N]
                     [--turns N] [--repeat N] [--cache DIR [--no-reindex]] [--no-raw]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import sqlean
import trio

import proto
from bench import corpus
from memoryd._logs import START, Row, SessionLog, count_records, list_logs, read_log
from memoryd._store import INDEX_FILE, schema
from memoryd.ranking import (
    TermBounds,
    Vocabulary,
    content_terms,
    fetch,
    function_words,
    prepare,
    query_terms,
    rank,
    rank_context,
)
from memoryd.ranking._bounds import read_frontiers
from memoryd.ranking._query import match_string
from memoryd.ranking._tuning import CANDIDATES, CONTEXT_WEIGHT
from proto import (
    AssistantRecord,
    Class,
    HitSource,
    RecallRanking,
    ToolCall,
    ToolResultRecord,
    UserRecord,
)

TARGETS = {
    "reindex": 0.8,  # ours / raw records per second, at least
    "content_p99": 1.2,  # ours / direct, at most
    "natural_p99": 0.1,  # ours / naive, at most
    "natural_p99_ms": 250.0,  # at most, at ten million records
    "agreement": 0.99,
    "turn_p99": 1.2,
    "block_p99_ms": 2.0,
    "size": 1.1,
}
"""The spec's ranking's targets; (c)'s hold for the context ranking too."""

CONTEXT_TARGETS = {
    "size": 1.6,  # the context index's size over the spec's, at most
    "build_rows_s": 40_000.0,  # memoryd's reindex, rows per second, at least
    "agreement": 1.0,  # memoryd's top 10 as `rank_context`'s in-process
}
"""The context ranking's targets."""

CONTEXT_NATURAL_P99_MS = ((1_000_000, 250.0), (10_000_000, 500.0))
"""The context ranking's natural-language p99 through memoryd, at most, up to each size."""

RANKINGS: dict[str, tuple[RecallRanking, ...]] = {
    "both": ("context", "spec"),
    "context": ("context",),
    "spec": ("spec",),
}
"""`--ranking`'s choices: the rankings each runs, in order."""

FUNCTION_WORDS = function_words(proto.MemorydRecall().languages)
"""The words memoryd's context ranking leaves out of a query (the default languages)."""

CONTEXT_QUERY = (
    f"SELECT rowid, bm25(hits, 1.0, {CONTEXT_WEIGHT}) FROM hits WHERE hits MATCH ? "
    f"ORDER BY bm25(hits, 1.0, {CONTEXT_WEIGHT}) LIMIT {CANDIDATES}"
)
"""The context ranking's FTS5 query, before its re-ranking by session."""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _verdict(ok: bool) -> str:
    return "holds" if ok else "MISSED"


def _context_natural_ms(records: int) -> tuple[int, float]:
    """The size whose target the context ranking's natural p99 at `records` is held to."""
    return next(
        ((size, ms) for size, ms in CONTEXT_NATURAL_P99_MS if records <= size),
        CONTEXT_NATURAL_P99_MS[-1],
    )


# -- raw sqlean --------------------------------------------------------------------------


def _raw_connect(path: Path) -> Any:
    conn = sqlean.connect(os.fspath(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def read_rows(home: Path) -> list[Row]:
    """Every row memoryd would index from the session logs under `home`, in log order."""
    rows: list[Row] = []
    for found in list_logs(home / "sessions"):
        new, _ = read_log(found, START, indexed=0, max_class=Class.private)
        rows.extend(new)
    return rows


def insert_rows(conn: Any, ranking: RecallRanking, rows: Sequence[Row], first: int) -> None:
    """Insert `rows` from rowid `first` on: `hits` as `ranking` keeps it, and `sources`."""
    if ranking == "spec":
        conn.executemany(
            "INSERT INTO hits (rowid, text) VALUES (?, ?)",
            ((first + i, row.text) for i, row in enumerate(rows)),
        )
    else:
        conn.executemany(
            "INSERT INTO hits (rowid, text, context) VALUES (?, ?, ?)",
            ((first + i, row.text, row.context) for i, row in enumerate(rows)),
        )
    conn.executemany(
        "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((first + i, *row.source()) for i, row in enumerate(rows)),
    )


def raw_bulk_insert(
    home: Path, raw: Path, ranking: RecallRanking = "spec", *, rows: Sequence[Row] | None = None
) -> tuple[int, float]:
    """Insert every row memoryd would index (`rows`, else read from `home`'s logs) into a new
    file `raw` with `ranking`'s schema; return (rows, seconds inserting)."""
    if rows is None:
        rows = read_rows(home)
    conn = _raw_connect(raw)
    for statement in schema(ranking):
        conn.execute(statement)
    started = time.perf_counter()
    conn.execute("BEGIN")
    insert_rows(conn, ranking, rows, 1)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return len(rows), seconds


def direct_recall(conn: Any, query: str, k: int = 10) -> list[int]:
    """The spec's query as a raw implementation runs it: rank in FTS5, join the winners.

    Returns the winners' rowids, best first.
    """
    terms = query_terms(query)
    if not terms:
        return []
    ranked = conn.execute(
        "SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH ? ORDER BY bm25(hits) LIMIT ?",
        (match_string(terms), k),
    ).fetchall()
    marks = ",".join("?" * len(ranked))
    list(conn.execute(f"SELECT * FROM sources WHERE rowid IN ({marks})", [r[0] for r in ranked]))
    return [int(r[0]) for r in ranked]


def direct_context(conn: Any, query: str) -> list[int]:
    """The context ranking's FTS5 query run directly (`CONTEXT_QUERY`, the query's content
    words): its best `CANDIDATES` rowids, best first, before any re-ranking."""
    terms = content_terms(query_terms(query), FUNCTION_WORDS)
    if not terms:
        return []
    return [int(rowid) for rowid, _ in conn.execute(CONTEXT_QUERY, (match_string(terms),))]


# -- memoryd ---------------------------------------------------------------------------


def start_memoryd(directory: Path, home: Path, ranking: RecallRanking) -> subprocess.Popen[bytes]:
    config = directory / "memoryd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n\n[recall]\nranking = "{ranking}"\n')
    (directory / "soul.md").write_text("A benchmark persona.\n")
    log = (directory / "memoryd.log").open("wb")
    child = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "serve", "--config", os.fspath(config)], stderr=log
    )
    admin = home / proto.OWNER_MEMORY.relative_path
    deadline = time.monotonic() + 60
    while not admin.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"memoryd did not start; see {directory / 'memoryd.log'}")
        time.sleep(0.05)
    return child


async def wait_index_ready(home: Path) -> float:
    admin = home / proto.OWNER_MEMORY.relative_path
    started = time.perf_counter()
    while True:
        try:
            await proto.call(admin, proto.RecallQuery(query="zzzz", k=1), proto.ToolResponse)
            return time.perf_counter() - started
        except proto.RemoteError:
            await trio.sleep(0.2)


async def reindex(home: Path) -> tuple[proto.Reindexed, float]:
    admin = home / proto.OWNER_MEMORY.relative_path
    started = time.perf_counter()
    reply = await proto.call(admin, proto.Reindex(), proto.Reindexed)
    return reply, time.perf_counter() - started


def recall_request(query: str, k: int, n: int) -> proto.ToolRequest:
    return proto.ToolRequest(
        session="chat-benchbenchbenchbench",
        call=proto.ToolCall(
            id=f"call-{n}", name="recall", arguments=json.dumps({"query": query, "k": k})
        ),
    )


async def socket_recall(home: Path, query: str, k: int, n: int) -> float:
    broker = home / proto.BROKER_MEMORY.relative_path
    started = time.perf_counter()
    reply = await proto.call(broker, recall_request(query, k, n), proto.ToolResponse)
    elapsed = time.perf_counter() - started
    if reply.status != "ok":
        raise SystemExit(f"recall failed: {reply.content}")
    return elapsed


# -- the runs ----------------------------------------------------------------------------


def read_bounds(index: Path) -> tuple[Vocabulary, TermBounds]:
    """The term counts and best scores memoryd reads in the background, read here."""
    conn = sqlean.connect(os.fspath(index), isolation_level=None)
    prepare(conn)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    bounds = TermBounds()
    generation = bounds.begin_elsewhere()  # as memoryd's scan does, in this process
    conn.execute("BEGIN")
    found = read_frontiers(conn, vocabulary.frequent() or [])
    conn.execute("COMMIT")
    bounds.install(found, generation)
    conn.close()
    return vocabulary, bounds


def measure_recall(
    home: Path,
    index: Path,
    queries: list[str],
    repeat: int,
    ranking: RecallRanking,
    known: tuple[Vocabulary, TermBounds] | None = None,
) -> dict[str, Any]:
    """Each query `repeat` times both ways (alternating which goes first); the top-10 agreement.

    The direct way is the ranking's query on the same file (`direct_recall` for the spec's
    ranking, `direct_context` for the context ranking). Percentiles are over the queries,
    of each query's median time: the machine is noisy, and a query's median is what a
    ratio of the two ways should compare. The tail over every single run is reported
    beside it. The agreement: `spec_agreement` or `context_agreement` (`known`, the term
    statistics, is for the first).
    """
    conn = sqlean.connect(os.fspath(index), isolation_level=None)
    prepare(conn)
    direct_query: Callable[[Any, str], list[int]] = (
        direct_recall if ranking == "spec" else direct_context
    )
    direct: list[list[float]] = [[] for _ in queries]
    ours: list[list[float]] = [[] for _ in queries]
    answers: list[list[int]] = [[] for _ in queries]

    async def run() -> None:
        for n, query in enumerate(queries[:20]):  # warm both caches alike
            direct_query(conn, query)
            await socket_recall(home, query, 10, n)
        for round_ in range(repeat):
            for n, query in enumerate(queries):
                for first in (True, False) if (n + round_) % 2 else (False, True):
                    if first:
                        started = time.perf_counter()
                        answers[n] = direct_query(conn, query)
                        direct[n].append(time.perf_counter() - started)
                    else:
                        ours[n].append(await socket_recall(home, query, 10, n))

    trio.run(run)
    if ranking == "spec":
        if known is None:
            raise ValueError("the spec's ranking's agreement needs the term statistics")
        agreement = spec_agreement(conn, queries, answers, known)
    else:
        agreement = context_agreement(home, conn, queries)
    conn.close()
    med_direct = [statistics.median(v) for v in direct]
    med_ours = [statistics.median(v) for v in ours]
    return {
        "direct_p50": _pct(med_direct, 0.5) * 1e3,
        "direct_p99": _pct(med_direct, 0.99) * 1e3,
        "ours_p50": _pct(med_ours, 0.5) * 1e3,
        "ours_p99": _pct(med_ours, 0.99) * 1e3,
        "direct_p99_runs": _pct([t for v in direct for t in v], 0.99) * 1e3,
        "ours_p99_runs": _pct([t for v in ours for t in v], 0.99) * 1e3,
        **agreement,
    }


def spec_agreement(
    conn: Any, queries: list[str], answers: list[list[int]], known: tuple[Vocabulary, TermBounds]
) -> dict[str, Any]:
    """How often memoryd's spec ranking (run again here, in-process, on the same file)
    gives the spec's query's timed answer; how often proven so, rows scored, plans."""
    vocabulary, bounds = known
    agree = proven = scored = 0
    plans: Counter[str] = Counter()
    for query, answer in zip(queries, answers, strict=True):
        conn.execute("BEGIN")
        ranking = rank(conn, query_terms(query), 10, vocabulary, bounds=bounds)
        conn.execute("COMMIT")
        agree += {r for r, _ in ranking.rows} == set(answer)
        proven += ranking.exact
        scored += ranking.scored
        plans[ranking.plan] += 1
    return {
        "agreement": agree / len(queries),
        "proven": proven / len(queries),
        "scored": scored / len(queries),
        "plans": plans,
    }


def context_agreement(home: Path, conn: Any, queries: list[str]) -> dict[str, Any]:
    """How often memoryd's top 10 (the owner's recall, hit by hit, through the admin
    socket) is `rank_context`'s, run in-process on the same file: the same sources in the
    same order."""
    admin = home / proto.OWNER_MEMORY.relative_path

    async def served() -> list[list[HitSource]]:
        found = []
        for query in queries:
            reply = await proto.call(
                admin, proto.OwnerRecall(query=query, k=10), proto.OwnerRecalled
            )
            found.append([hit.source for hit in reply.hits])
        return found

    agree = 0
    for query, theirs in zip(queries, trio.run(served), strict=True):
        conn.execute("BEGIN")
        ranked = rank_context(conn, query_terms(query), 10, FUNCTION_WORDS)
        ours = [hit.source for hit in fetch(conn, [rowid for rowid, _ in ranked.rows])]
        conn.execute("COMMIT")
        agree += ours == theirs
    return {"agreement": agree / len(queries)}


def _turn(n: int) -> list[UserRecord | AssistantRecord | ToolResultRecord]:
    """One finished turn of 5 records, 5 of whose texts are indexed."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    calls = [
        ToolCall(id=f"t{n}a", name="read_file", arguments='{"path":"/srv/notes/plan.txt"}'),
        ToolCall(id=f"t{n}b", name="list_dir", arguments='{"path":"/srv/notes"}'),
    ]
    return [
        UserRecord(time=now, content=f"what did we decide about the launch window {n}"),
        AssistantRecord(time=now, content="Let me look at the plan.", tool_calls=calls),
        *(
            ToolResultRecord(time=now, call_id=call.id, name=call.name, content="Thursday.")
            for call in calls
        ),
        AssistantRecord(time=now, content=f"The launch window moved to Thursday ({n})."),
    ]


def copy_index(index: Path, copy: Path) -> None:
    """A page-for-page copy of memoryd's index: the raw turn inserts start from the same
    segments, so both sides meet FTS5's merges at the same moments."""
    source = sqlean.connect(os.fspath(index))
    target = sqlean.connect(os.fspath(copy))
    source.backup(target)
    source.close()
    target.close()


def measure_turns(home: Path, copy: Path, turns: int, ranking: RecallRanking) -> dict[str, float]:
    """One turn appended to a log: memoryd's session_updated, and the raw insert of the
    rows memoryd indexes for it (read from the log, untimed) into `copy`."""
    logs = list_logs(home / "sessions")[:turns]
    encoder = msgspec.json.Encoder()
    conn = _raw_connect(copy)
    next_rowid = conn.execute("SELECT max(rowid) FROM sources").fetchone()[0] + 1
    loop = home / proto.LOOP_MEMORY.relative_path
    ours: list[float] = []
    direct: list[float] = []

    async def ours_turn(found: SessionLog) -> None:
        started = time.perf_counter()
        await proto.call(loop, proto.SessionUpdated(session=found.session), proto.Ok)
        ours.append(time.perf_counter() - started)

    def raw_turn(rows: list[Row]) -> None:
        nonlocal next_rowid
        started = time.perf_counter()
        conn.execute("BEGIN")
        insert_rows(conn, ranking, rows, next_rowid)
        conn.execute("COMMIT")
        direct.append(time.perf_counter() - started)
        next_rowid += len(rows)

    async def run() -> None:
        for n, found in enumerate(logs):
            if found.path.stat().st_nlink > 1:
                raise SystemExit(f"{found.path} is the corpus's too: (c) would append to it")
            indexed = count_records(found.path)
            with found.path.open("ab") as f:
                f.write(b"".join(encoder.encode(r) + b"\n" for r in _turn(n)))
            rows, _ = read_log(found, START, indexed=indexed, max_class=Class.private)
            if n % 2:
                raw_turn(rows)
                await ours_turn(found)
            else:
                await ours_turn(found)
                raw_turn(rows)

    trio.run(run)
    conn.close()
    return {
        "ours_p50": _pct(ours, 0.5) * 1e3,
        "ours_p99": _pct(ours, 0.99) * 1e3,
        "direct_p50": _pct(direct, 0.5) * 1e3,
        "direct_p99": _pct(direct, 0.99) * 1e3,
    }


def measure_block(home: Path, calls: int = 1000) -> float:
    loop = home / proto.LOOP_MEMORY.relative_path

    async def run() -> list[float]:
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            await proto.call(loop, proto.MemoryBlock(), proto.MemoryBlockReply)
            latencies.append(time.perf_counter() - started)
        return latencies

    return _pct(trio.run(run), 0.99) * 1e3


def _size(path: Path) -> int:
    return sum(
        Path(f"{path}{suffix}").stat().st_size
        for suffix in ("", "-wal")
        if Path(f"{path}{suffix}").exists()
    )


def wait_for_term_counts(log: Path, seen: tuple[int, int], deadline_s: float = 3600) -> None:
    """Wait until memoryd has counted the index's terms, and read their best scores, once
    more than `seen` times each.

    Both are read in the background after a (re)build; until they are, recall counts
    every term by walking it and bounds it loosely, which is not what the benchmark
    measures.
    """
    deadline = time.monotonic() + deadline_s
    while any(now <= then for now, then in zip(_counted(log), seen, strict=True)):
        if time.monotonic() > deadline:
            raise SystemExit(f"memoryd did not count the index's terms; see {log}")
        time.sleep(0.5)


def _counted(log: Path) -> tuple[int, int]:
    text = log.read_text(errors="replace")
    return (
        text.count("counted the index's frequent terms"),
        text.count("read the best scores of"),
    )


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _corpus(base: Path, home: Path, records: int) -> corpus.Corpus:
    """The corpus of `records` rows under `home`: generated, or the cached one in `base`."""
    described = base / "corpus.json"
    if described.exists():
        counts = json.loads(described.read_text())
        print(f"corpus: the cached one in {base}", flush=True)
        return corpus.described(**counts)
    shutil.rmtree(home, ignore_errors=True)
    for ranking in RANKINGS["both"]:  # their homes and files are the old corpus's
        shutil.rmtree(base / ranking, ignore_errors=True)
    t0 = time.perf_counter()
    made = corpus.generate(home, records)
    print(
        f"corpus: {made.logs:,} session logs, {made.lines:,} records, {made.rows:,} rows to "
        f"index, {made.archive} archive entries ({time.perf_counter() - t0:.0f} s to write)",
        flush=True,
    )
    counts = {"logs": made.logs, "lines": made.lines, "rows": made.rows, "archive": made.archive}
    described.write_text(json.dumps(counts))
    return made


def ranking_home(corpus_home: Path, home: Path, turns: int) -> None:
    """Make `home` for one ranking's memoryd, unless it is there (cached).

    The corpus's session logs are hard-linked into it (the corpus is written once per
    size) and archive.md copied; the first `turns` logs, which (c) appends a turn to, are
    then made files of their own, so neither the corpus nor the other ranking's home sees
    those turns.
    """
    if not home.exists():
        staging = home.with_name(f"{home.name}.new")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(corpus_home / "sessions", staging / "sessions", copy_function=os.link)
        (staging / "memory").mkdir(mode=0o700)
        shutil.copyfile(corpus_home / "memory" / "archive.md", staging / "memory" / "archive.md")
        staging.rename(home)
    spare = home / "copying.jsonl"
    for found in list_logs(home / "sessions")[:turns]:
        if found.path.stat().st_nlink > 1:
            shutil.copyfile(found.path, spare)
            os.replace(spare, found.path)


def _raw(
    base: Path, home: Path, rankings: Sequence[RecallRanking], *, skip: bool
) -> dict[str, dict[str, float]]:
    """Each ranking's raw bulk insert figures: run now (the rows read once for all), or
    cached in `base/<ranking>/` with its file. NaN when skipped and not cached."""
    found: dict[str, dict[str, float]] = {}
    missing: list[RecallRanking] = []
    for ranking in rankings:
        figures, raw = base / ranking / "raw.json", base / ranking / "raw.sqlite3"
        if figures.exists() and raw.exists():
            found[ranking] = dict(json.loads(figures.read_text()))
        elif skip:
            found[ranking] = {"raw_rate": math.nan, "raw_size": math.nan}
        else:
            missing.append(ranking)
    if not missing:
        return found
    rows = read_rows(home)
    for ranking in missing:
        keep = base / ranking
        keep.mkdir(parents=True, exist_ok=True)
        raw = keep / "raw.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{raw}{suffix}").unlink(missing_ok=True)
        _, seconds = raw_bulk_insert(home, raw, ranking, rows=rows)
        found[ranking] = {"raw_rate": len(rows) / seconds, "raw_size": _size(raw)}
        (keep / "raw.json").write_text(json.dumps(found[ranking]))
        print(
            f"raw {ranking}: {len(rows):,} rows inserted in {seconds:.1f} s "
            f"({len(rows) / seconds:,.0f} rows/s)",
            flush=True,
        )
    del rows
    gc.collect()
    return found


def _built(index: Path, records: int, seconds: float) -> dict[str, float]:
    """(a)'s figures of a build of `index` that read `records` records in `seconds`."""
    conn = sqlean.connect(os.fspath(index))
    rows = conn.execute("SELECT count(*) FROM sources").fetchone()[0]
    conn.close()
    return {
        "ours_rate": records / seconds,
        "ours_rows_rate": rows / seconds,
        "ours_size": _size(index),
    }


def measure_ranking(
    ranking: RecallRanking,
    made: corpus.Corpus,
    queries: tuple[list[str], list[str]],
    base: Path,
    directory: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One ranking at one size: memoryd on a home of its own with that ranking; (a) to (c).

    The home and the reindex figures are kept in `base/<ranking>/` (with `--cache`, for
    the next run; with `--no-reindex` too, the reindex figures are the cached run's or the
    start-up build's); memoryd's config and log, and the copy (c) inserts into, are in
    `directory/memoryd-<ranking>/`.
    """
    keep, run = base / ranking, directory / f"memoryd-{ranking}"
    keep.mkdir(parents=True, exist_ok=True)
    run.mkdir(parents=True, exist_ok=True)
    home = keep / "home"
    ranking_home(base / "home", home, args.turns)
    spec = ranking == "spec"
    figures: dict[str, Any] = {"load_before": _load()}
    child: subprocess.Popen[bytes] | None = None
    copy = run / "copy.sqlite3"
    try:
        index = home / "index" / INDEX_FILE
        built_at_start = not index.exists()
        child = start_memoryd(run, home, ranking)
        first_build_s = trio.run(wait_index_ready, home)
        log = run / "memoryd.log"
        if spec:
            wait_for_term_counts(log, (0, 0))
        print(
            f"{ranking}: memoryd {'built' if built_at_start else 'opened'} its index at "
            f"start-up in {first_build_s:.1f} s",
            flush=True,
        )
        reindexed = keep / "reindex.json"
        if args.no_reindex and built_at_start:
            # The start-up build read every log into a new file, as a reindex does.
            figures.update(_built(index, made.rows, first_build_s))
            reindexed.write_text(json.dumps(figures))
        elif args.no_reindex and reindexed.exists():
            figures.update(json.loads(reindexed.read_text()))
            print(f"{ranking}: reindex: the cached run's figures", flush=True)
        else:
            seen = _counted(log)
            reply, ours_s = trio.run(reindex, home)
            if spec:
                wait_for_term_counts(log, seen)
            built = _built(index, reply.records, ours_s)
            reindexed.write_text(json.dumps(built))
            figures.update(built)
            print(
                f"{ranking}: reindexed {reply.logs:,} logs, {reply.records:,} records, "
                f"{reply.archive} archive entries in {ours_s:.1f} s",
                flush=True,
            )
        gc.collect()
        gc.freeze()  # the generated corpus is not the benchmark: keep it out of the GC's way
        known = read_bounds(index) if spec else None
        content, natural = queries
        figures["content"] = measure_recall(home, index, content, args.repeat, ranking, known)
        figures["natural"] = measure_recall(home, index, natural, args.repeat, ranking, known)
        copy_index(index, copy)
        figures["turns"] = measure_turns(home, copy, args.turns, ranking)
        figures["block_p99"] = measure_block(home)
        gc.unfreeze()
    finally:
        if child is not None:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=60)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    figures["load_after"] = _load()
    return figures


def run_point(records: int, args: argparse.Namespace) -> dict[str, Any]:
    """One size: build (or reuse) the corpus and the raw files, measure each ranking.

    With `--cache DIR` the corpus (`DIR/<records>/home`) and each ranking's raw file, home
    and index (`DIR/<records>/<ranking>/`) are kept and used again by the next run (a 10M
    corpus takes an hour of CPU to write and index); the turns appended by (c) stay in
    the ranking's home.
    """
    started = time.perf_counter()
    directory = Path(tempfile.mkdtemp(prefix="bxi", dir="/tmp"))
    base = Path(args.cache) / str(records) if args.cache else directory
    base.mkdir(parents=True, exist_ok=True)
    point: dict[str, Any] = {"records": records}
    try:
        made = _corpus(base, base / "home", records)
        raw = _raw(base, base / "home", args.rankings, skip=args.no_raw)
        queries = (
            list(corpus.content_queries(made, args.queries)),
            list(corpus.natural_queries(made, args.queries)),
        )
        for ranking in args.rankings:
            point[ranking] = raw[ranking] | measure_ranking(
                ranking, made, queries, base, directory, args
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    point["seconds"] = time.perf_counter() - started
    return point


# -- the tables --------------------------------------------------------------------------


def _row(name: str, ours: float, theirs: float, unit: str, ratio: float, target: str) -> None:
    print(f"{name:<34} {ours:>10,.1f} {theirs:>10,.1f} {unit:<6} {ratio:>6.2f}x  {target}")


def _at_most(ratio: float, limit: float) -> str:
    return f"<= {limit}x  {_verdict(ratio <= limit)}"


def _millions(records: int) -> str:
    return f"{records / 1e6:g}M"


def print_ranking(records: int, ranking: RecallRanking, f: dict[str, Any], repeat: int) -> None:
    """The table of one ranking at one size: memoryd beside raw sqlean and the ranking's
    query run directly; the spec's targets for the spec's ranking, the context ranking's
    for it ((c)'s are both's)."""
    spec = ranking == "spec"
    c, nl, turns = f["content"], f["natural"], f["turns"]
    print()
    print(
        f"{records:,} records, the {ranking} ranking; load average (1/5/15 min) "
        f"{f['load_before']} before, {f['load_after']} after"
    )
    print(f"{'':<34} {'memoryd':>10} {'raw':>10} {'':<6} {'ratio':>7}  target")
    r = f["ours_rate"] / f["raw_rate"]
    limit = TARGETS["reindex"]
    _row(
        "(a) full reindex",
        f["ours_rate"],
        f["raw_rate"],
        "rec/s",
        r,
        f">= {limit}x  {_verdict(r >= limit)}" if spec else "",
    )
    rate, least = f["ours_rows_rate"], CONTEXT_TARGETS["build_rows_s"]
    _row(
        "    build",
        rate,
        f["raw_rate"],
        "rows/s",
        rate / f["raw_rate"],
        "" if spec else f">= {least:,.0f} rows/s (memoryd)  {_verdict(rate >= least)}",
    )
    r = f["ours_size"] / f["raw_size"]
    _row(
        "    index size",
        f["ours_size"] / 1e6,
        f["raw_size"] / 1e6,
        "MB",
        r,
        _at_most(r, TARGETS["size"]) if spec else "",
    )
    for name, m, limit in (
        ("(b) content words", c, TARGETS["content_p99"]),
        ("    natural language", nl, TARGETS["natural_p99"]),
    ):
        _row(
            f"{name}, p50",
            m["ours_p50"],
            m["direct_p50"],
            "ms",
            m["ours_p50"] / m["direct_p50"],
            "",
        )
        r = m["ours_p99"] / m["direct_p99"]
        _row(
            f"{name}, p99",
            m["ours_p99"],
            m["direct_p99"],
            "ms",
            r,
            _at_most(r, limit) if spec else "",
        )
    at, ms = (10_000_000, TARGETS["natural_p99_ms"]) if spec else _context_natural_ms(records)
    print(
        f"    natural language p99 {nl['ours_p99']:,.1f} ms (target <= {ms:.0f} ms at "
        f"{_millions(at)}: {_verdict(nl['ours_p99'] <= ms)})"
    )
    print(
        f"    (p50/p99 over the queries of each query's median of {repeat} runs; over "
        f"every run, p99 content {c['ours_p99_runs']:,.1f} vs {c['direct_p99_runs']:,.1f} ms, "
        f"natural {nl['ours_p99_runs']:,.1f} vs {nl['direct_p99_runs']:,.1f} ms)"
    )
    for name, m in (("content words", c), ("natural language", nl)):
        if spec:
            print(
                f"    top-10 as the naive query's, {name}: {m['agreement']:.1%} of queries "
                f"(target >= 99%: {_verdict(m['agreement'] >= TARGETS['agreement'])}); "
                f"provably exact {m['proven']:.1%}; rows scored outside FTS5 "
                f"{m['scored']:,.0f} a query; plans {dict(m['plans'])}"
            )
        else:
            agreement = m["agreement"]
            print(
                f"    top-10 as rank_context's in-process, {name}: {agreement:.1%} of queries "
                f"(target 100%: {_verdict(agreement >= CONTEXT_TARGETS['agreement'])})"
            )
    if not spec:
        print(
            "    (raw for (b): the context ranking's FTS5 query alone, its best "
            f"{CANDIDATES} by bm25(hits, 1.0, {CONTEXT_WEIGHT}) for the query's content words)"
        )
    _row(
        "(c) session_updated, p50",
        turns["ours_p50"],
        turns["direct_p50"],
        "ms",
        turns["ours_p50"] / turns["direct_p50"],
        "",
    )
    r = turns["ours_p99"] / turns["direct_p99"]
    _row(
        "    session_updated, p99",
        turns["ours_p99"],
        turns["direct_p99"],
        "ms",
        r,
        _at_most(r, TARGETS["turn_p99"]),
    )
    block = f["block_p99"]
    print(f"    memory_block p99: {block:.2f} ms (target < 2 ms: {_verdict(block < 2.0)})")


def context_verdicts(point: dict[str, Any]) -> str:
    """The context ranking's targets at one size, each with its verdict, on one line."""
    f = point["context"]
    found = []
    if "spec" in point:
        r, limit = f["ours_size"] / point["spec"]["ours_size"], CONTEXT_TARGETS["size"]
        found.append(f"index {r:.2f}x the spec's (<= {limit}x {_verdict(r <= limit)})")
    rate, least = f["ours_rows_rate"], CONTEXT_TARGETS["build_rows_s"]
    found.append(
        f"reindex {rate:,.0f} rows/s, raw insert {f['raw_rate']:,.0f} "
        f"(memoryd >= {least:,.0f} {_verdict(rate >= least)})"
    )
    at, ms = _context_natural_ms(point["records"])
    p99 = f["natural"]["ours_p99"]
    found.append(
        f"natural p99 {p99:,.0f} ms (<= {ms:.0f} at {_millions(at)} {_verdict(p99 <= ms)})"
    )
    agree = min(f["content"]["agreement"], f["natural"]["agreement"])
    found.append(
        f"top 10 as rank_context's {agree:.1%} ({_verdict(agree >= CONTEXT_TARGETS['agreement'])})"
    )
    return "; ".join(found)


def print_point(point: dict[str, Any], repeat: int) -> None:
    """The tables of one size, one per ranking, and the context ranking's targets."""
    for ranking in RANKINGS["both"]:
        if ranking in point:
            print_ranking(point["records"], ranking, point[ranking], repeat)
    print()
    if "context" in point:
        print(f"the context ranking's targets: {context_verdicts(point)}")
    print(f"{point['records']:,} records: {point['seconds']:,.0f} s", flush=True)


def print_curve(points: list[dict[str, Any]]) -> None:
    """Every size, each ranking on a line of its own: the curve the issue asks for."""
    print()
    print(
        "the curve (ratios: memoryd over raw sqlean, or over the ranking's query run "
        "directly for recall)"
    )
    head = (
        f"{'records':>11} {'ranking':<7} {'reindex rec/s':>17} {'build rows/s':>12} "
        f"{'size MB':>13} {'content p50/p99 ms':>24} {'natural p50/p99 ms':>26} "
        f"{'agree':>6} {'exact':>6} {'turn p99 ms':>16}  load"
    )
    print(head)
    for p in points:
        for ranking in RANKINGS["both"]:
            if ranking not in p:
                continue
            f = p[ranking]
            c, nl, t = f["content"], f["natural"], f["turns"]
            exact = f"{nl['proven']:>6.1%}" if "proven" in nl else f"{'-':>6}"
            print(
                f"{p['records']:>11,} {ranking:<7} "
                f"{f['ours_rate']:>9,.0f} {f['ours_rate'] / f['raw_rate']:>5.2f}x "
                f"{f['ours_rows_rate']:>12,.0f} "
                f"{f['ours_size'] / 1e6:>7,.0f} {f['ours_size'] / f['raw_size']:>4.2f}x "
                f"{c['ours_p50']:>6.1f}/{c['ours_p99']:<7.1f} "
                f"{c['ours_p99'] / c['direct_p99']:>5.2f}x "
                f"{nl['ours_p50']:>6.0f}/{nl['ours_p99']:<7.0f} "
                f"{nl['ours_p99'] / nl['direct_p99']:>6.3f}x "
                f"{nl['agreement']:>6.1%} {exact} "
                f"{t['ours_p99']:>7.2f} {t['ours_p99'] / t['direct_p99']:>5.2f}x  "
                f"{f['load_before']} -> {f['load_after']}"
            )
        if "context" in p:
            print(f"{'':>11} context: {context_verdicts(p)}")
    print(
        "    natural: memoryd p50/p99 and p99 over the ranking's query run directly; agree: "
        "same top 10 as the spec's query (spec) or as rank_context in-process (context); "
        "exact: proven so by the bounds (spec)"
    )


def main(argv: list[str]) -> None:
    """Run the index benchmark at each size asked for; print each table and the curve."""
    parser = argparse.ArgumentParser(prog="just bench index", description=__doc__)
    parser.add_argument(
        "--records",
        default="1000000",
        help="rows to index; several sizes separated by commas run one after the other",
    )
    parser.add_argument(
        "--ranking",
        choices=sorted(RANKINGS),
        default="both",
        help="the recall ranking(s) memoryd runs with ([recall] ranking); both by default",
    )
    parser.add_argument("--queries", type=int, default=300, help="queries of each kind")
    parser.add_argument("--turns", type=int, default=1000, help="session_updated calls")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each query each way")
    parser.add_argument(
        "--cache",
        help="keep each size's corpus, raw files and homes in CACHE/<records>/ and reuse them",
    )
    parser.add_argument(
        "--no-reindex",
        action="store_true",
        help="with --cache: skip the full reindex and show the cached run's figures",
    )
    parser.add_argument(
        "--no-raw",
        action="store_true",
        help="skip the raw bulk insert when it is not cached (its ratios show as nan)",
    )
    args = parser.parse_args(argv)
    args.rankings = RANKINGS[args.ranking]
    sizes = [int(n.replace("_", "")) for n in args.records.split(",")]
    points = []
    for records in sizes:
        point = run_point(records, args)
        print_point(point, args.repeat)
        points.append(point)
    print_curve(points)
