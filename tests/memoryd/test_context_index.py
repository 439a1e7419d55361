"""The context ranking's index: each message beside the one it follows, kept true.

The `context` column of a row is the text of the last owner or assistant message indexed
before it in its session. It must be the same however the row came to be indexed (a
turn at a time, after a clean stop, after a crash, across a log's epochs, in a rebuild),
must never hold what a forget took out, and a change of `[recall] ranking` rebuilds the
file in the other schema.
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec
import pytest
import sqlean
import trio
from hypothesis import given
from hypothesis import strategies as st
from memoryd_harness import (
    OTHER,
    SESSION,
    Record,
    append,
    open_index,
    result,
    said,
    sources_in,
    user,
)

from memoryd._clean import CLEAN_FILE
from memoryd._index import Index
from memoryd._store import row_value
from memoryd.ranking import LANGUAGES, content_terms, function_words
from proto import Class


def contexts(home: Path) -> list[tuple[str, str]]:
    """Every row's (text, context), by rowid."""
    conn = sqlean.connect(f"file:{home / 'index' / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        return [(str(t), str(c)) for t, c in conn.execute("SELECT text, context FROM hits")]
    finally:
        conn.close()


def schema_of(home: Path) -> str:
    conn = sqlean.connect(f"file:{home / 'index' / 'memory.sqlite3'}?mode=ro", uri=True)
    try:
        return str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'hits'").fetchone()[0])
    finally:
        conn.close()


EXPECTED = [
    ("How was the pottery workshop?", ""),
    ("I went last Saturday.", "How was the pottery workshop?"),
    ("Did you make anything?", "I went last Saturday."),
    ("Two bowls.", "Did you make anything?"),
]


async def test_each_message_is_indexed_with_the_one_it_follows_turn_by_turn(
    short_dir: Path,
) -> None:
    sessions = short_dir / "sessions"
    async with open_index(short_dir, ranking="context") as index:
        for asked, answered in [EXPECTED[0:2], EXPECTED[2:4]]:
            append(sessions, [user(asked[0]), said(answered[0])])
            await index.session_updated(SESSION)
    assert contexts(short_dir) == EXPECTED


@pytest.mark.parametrize("stop", ["clean", "crash", "rebuild"])
async def test_the_message_followed_survives_a_stop_and_a_rebuild(
    short_dir: Path, stop: str
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user(EXPECTED[0][0]), said(EXPECTED[1][0])])
    async with open_index(short_dir, ranking="context") as index:
        pass
    if stop == "crash":  # no clean stop: the cursors are lost, the logs walked by count
        (short_dir / "index" / CLEAN_FILE).unlink()
    append(sessions, [user(EXPECTED[2][0]), said(EXPECTED[3][0])])
    async with open_index(short_dir, ranking="context") as index:
        await index.session_updated(SESSION)
        if stop == "rebuild":
            await index.rebuild()
    assert contexts(short_dir) == EXPECTED


async def test_tool_calls_have_no_context_and_are_no_message_to_follow(short_dir: Path) -> None:
    call = said("Let me look.", ("search", '{"q": "kiln"}'))
    append(short_dir / "sessions", [user("Find a kiln."), call, said("Found one.")])
    async with open_index(short_dir, ranking="context"):
        pass
    assert contexts(short_dir) == [
        ("Find a kiln.", ""),
        ("Let me look.", "Find a kiln."),
        ('search {"q": "kiln"}', ""),
        ("Found one.", "Let me look."),
    ]


async def test_a_secret_message_is_never_anothers_context(short_dir: Path) -> None:
    records: list[Record] = [
        user("check the vault"),
        said(None, ("vault", "{}")),
        result(Class.secret, text="the code is 5512"),
        said("done"),
    ]
    append(short_dir / "sessions", records)
    append(short_dir / "sessions", [user("hello"), said("hi")], OTHER)
    async with open_index(short_dir, ranking="context"):
        pass
    assert all("5512" not in text + context for text, context in contexts(short_dir))


async def test_the_context_continues_across_a_sessions_logs(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("first epoch ends here")], epoch=0)
    append(sessions, [said("second epoch starts")], epoch=1)
    async with open_index(short_dir, ranking="context"):
        pass
    assert contexts(short_dir) == [
        ("first epoch ends here", ""),
        ("second epoch starts", "first epoch ends here"),
    ]


async def test_a_forget_leaves_no_trace_in_the_message_after(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    append(
        sessions, [user("my pin is ZEBRA-7731"), said("I will keep ZEBRA-7731 safe"), user("ok")]
    )
    async with open_index(short_dir, ranking="context") as index:
        async with index.forget.forgetting():
            plan = await trio.to_thread.run_sync(index.forget.plan_forget, "zebra-7731")
            assert plan.held == 2  # messages holding it; the third holds it only as context
            assert len(plan.rows) == 3
            conflicts, _ = await trio.to_thread.run_sync(
                index.forget.apply_forget, "fg-abcdef123456", plan.rows, plan.archive
            )
            assert conflicts == []
            assert await index.forget.truncate_wal()
            assert await trio.to_thread.run_sync(index.verify_forget, "zebra-7731") == []
        assert (await index.search("zebra 7731", 10)).found == []
    assert contexts(short_dir) == [
        ("my pin is [forgotten]", ""),
        ("I will keep [forgotten] safe", "my pin is [forgotten]"),
        ("ok", "I will keep [forgotten] safe"),
    ]


async def test_a_change_of_ranking_rebuilds_the_index_in_the_others_schema(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(short_dir / "sessions", [user("the launch window moved"), said("noted")])
    async with open_index(short_dir, ranking="context"):
        pass
    assert "context" in schema_of(short_dir)
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir, ranking="spec") as index:
        assert [h.text for h in (await index.search("launch", 5)).found] == [
            "the launch window moved"
        ]
    assert "context" not in schema_of(short_dir)
    assert "built for the context ranking, not the spec one; rebuilding it" in caplog.text
    assert "damaged" not in caplog.text
    index = Index(short_dir / "index", sources_in(short_dir, ranking="context"))
    assert index.files.sources.ranking == "context"


@given(st.lists(st.text(max_size=12), max_size=8), st.sampled_from(sorted(LANGUAGES)))
def test_content_terms_leave_out_function_words_unless_nothing_is_left(
    terms: list[str], language: str
) -> None:
    words = function_words([language])
    kept = content_terms(terms, words)
    assert kept == [t for t in terms if t.casefold() not in words] or kept == terms
    if any(t.casefold() not in words for t in terms):
        assert all(t.casefold() not in words for t in kept)


def test_words_of_other_scripts_are_always_searched() -> None:
    words = function_words(["en", "de", "fr", "es"])
    assert content_terms(["что", "the", "東京"], words) == ["что", "東京"]
    assert content_terms(["son", "die"], function_words(["en"])) == ["son", "die"]
    assert content_terms(["The", "THE"], words) == ["The", "THE"]  # nothing else: kept


@given(st.text(), st.text())
def test_a_rows_value_reads_back_its_two_columns(text: str, context: str) -> None:
    assert msgspec.json.decode(row_value("context", text, context)) == [text, context]
    assert row_value("spec", text, context) == text
