"""`bxctl recall` against a real memoryd, and `bxctl sessions show --at`: every hit opens.

Each hit names its session whole and prints the command that opens its record; the
tests run that very command and check it shows the record the hit came from, marked.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import trio
from bxctl_run import run, write_session

import entries
import proto
from bxctl import CommandError
from memoryd import Memoryd
from memoryd._config import resolve
from proto import AssistantRecord, Class, ToolCall, ToolResultRecord, UserRecord

CAP_S = 20
SESSION = "chat-k6m5ert76psohrmw5uwb2ibpb4"
TWIN = "chat-k6m5ertzzzzzzzzzzzzzzzzzzz"
"""Shares its first 9 characters (what the model's recall shows) with SESSION."""

Record = UserRecord | AssistantRecord | ToolResultRecord


def log(records: Iterable[Record | bytes]) -> bytes:
    return b"".join(
        (r if isinstance(r, bytes) else msgspec.json.encode(r)) + b"\n" for r in records
    )


def said(text: str, minute: str = "14:02") -> UserRecord:
    return UserRecord(time=f"2026-09-20T{minute}:11Z", content=text)


def answered(text: str, minute: str = "14:02") -> AssistantRecord:
    return AssistantRecord(time=f"2026-09-20T{minute}:30Z", content=text)


CONVERSATION: list[Record] = [
    said("Good morning.", "14:00"),
    answered("Good morning to you.", "14:00"),
    said("What is on today?", "14:01"),
    answered("Two meetings and the Heron review.", "14:01"),
    said("FYI the launch window moved to Thursday."),
    answered("Noted: the launch window is now Thursday."),
    said("Thanks.", "14:03"),
]
"""SESSION's log: the owner's launch message is record 4, the answer record 5."""


def write_home(base: Path) -> Path:
    home = base / "h"
    (home / "config").mkdir(parents=True)
    write_session(home, SESSION, log=log(CONVERSATION))
    write_session(home, TWIN, log=log([said("Lunch at noon?", "09:00")]))
    (home / "memory").mkdir()
    (home / "memory" / "archive.md").write_text(
        entries.archive_record(
            "Owner prefers answers in UTC.",
            name="memory.md",
            session=SESSION,
            moved_at=datetime(2026, 9, 24, 20, 14, tzinfo=UTC),
        )
    )
    return home


@pytest.fixture
async def home(nursery: trio.Nursery, short_dir: Path) -> Path:
    """A home with two sessions and an archived entry, and a real memoryd serving it."""
    made = write_home(short_dir)
    (short_dir / "soul.md").write_text("You are a test persona.\n")
    # The spec's ranking: its order is plain bm25, so each test names its hits in order
    # (the context ranking's own order is memoryd's tests').
    config = proto.MemorydConfig(
        paths=proto.PathsSection(home=str(made)), recall=proto.MemorydRecall(ranking="spec")
    )
    settings = resolve(config, config_dir=short_dir)
    role = Memoryd(settings)
    role.memory.ensure(settings.soul_starter)
    with trio.fail_after(CAP_S):
        await role.start(nursery, trio.Event())
        await role.index.caught_up.wait()
    return made


async def output(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert await run(*argv) == 0
    return capsys.readouterr().out


def opened(printed: str) -> list[list[str]]:
    """The `open:` commands printed, as argv after `bxctl`."""
    commands = [line.split("open: ", 1)[1] for line in printed.splitlines() if "open: " in line]
    argvs = [shlex.split(command) for command in commands]
    assert all(argv[0] == "bxctl" for argv in argvs)
    return [argv[1:] for argv in argvs]


async def test_each_hit_names_its_session_whole_and_how_to_open_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await output(capsys, "recall", "launch", "window", "--home", str(home))
    assert out == (
        f"[1] session {SESSION}, 2026-09-20 14:02 UTC\n"
        "    the owner said · private\n"
        "    FYI the launch window moved to Thursday.\n"
        f"    open: bxctl sessions show {SESSION} --at 4 --home {home}\n"
        "\n"
        f"[2] session {SESSION}, 2026-09-20 14:02 UTC\n"
        "    the assistant said · private\n"
        "    Noted: the launch window is now Thursday.\n"
        f"    open: bxctl sessions show {SESSION} --at 5 --home {home}\n"
    )


async def test_the_printed_command_opens_exactly_that_record(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = opened(await output(capsys, "recall", "launch", "--home", str(home)))
    shown = await output(capsys, *first)
    assert shown == (
        f"session {SESSION}, created 2026-11-30T08:00:00Z, model m\n"
        "records 1 to 6 (of 7, from 0); > marks 4\n"
        "\n"
        "  #1 [2026-09-20T14:00:30Z] assistant:\n"
        "  Good morning to you.\n"
        "\n"
        "  #2 [2026-09-20T14:01:11Z] owner:\n"
        "  What is on today?\n"
        "\n"
        "  #3 [2026-09-20T14:01:30Z] assistant:\n"
        "  Two meetings and the Heron review.\n"
        "\n"
        "> #4 [2026-09-20T14:02:11Z] owner:\n"
        "> FYI the launch window moved to Thursday.\n"
        "\n"
        "  #5 [2026-09-20T14:02:30Z] assistant:\n"
        "  Noted: the launch window is now Thursday.\n"
        "\n"
        "  #6 [2026-09-20T14:03:11Z] owner:\n"
        "  Thanks.\n"
    )
    marked = [line for line in (await output(capsys, *second)).splitlines() if line[:1] == ">"]
    assert marked == [
        "> #5 [2026-09-20T14:02:30Z] assistant:",
        "> Noted: the launch window is now Thursday.",
    ]


async def test_a_session_sharing_the_models_prefix_still_opens(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert SESSION[:9] == TWIN[:9]
    [argv] = opened(await output(capsys, "recall", "Lunch", "--home", str(home)))
    assert argv[:3] == ["sessions", "show", TWIN]
    shown = await output(capsys, *argv)
    assert "> #0 [2026-09-20T09:00:11Z] owner:\n> Lunch at noon?\n" in shown


async def test_an_archived_hit_opens_with_memory_why(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await output(capsys, "recall", "UTC", "answers", "--home", str(home))
    assert out == (
        "[1] archive.md, moved 2026-09-24 from memory.md\n"
        "    approved memory · private\n"
        "    Owner prefers answers in UTC.\n"
        f"    open: bxctl memory why 'Owner prefers answers in UTC.' --home {home}\n"
    )
    [argv] = opened(out)
    assert await run(*argv, "--json") == 0
    [why] = json.loads(capsys.readouterr().out)
    assert (why["file"], why["entry"]) == ("archive", "Owner prefers answers in UTC.")


async def test_recall_json_gives_each_hit_whole(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await output(capsys, "recall", "launch", "-k", "1", "--json", "--home", str(home))
    assert json.loads(out) == {
        "query": "launch",
        "label": {"class": "private", "untrusted": False},
        "hits": [
            {
                "source": {
                    "kind": "session",
                    "session": SESSION,
                    "epoch": 0,
                    "record": 4,
                    "time": "2026-09-20T14:02:11Z",
                    "role": "user",
                    "class": "private",
                    "untrusted": False,
                },
                "label": {"class": "private", "untrusted": False},
                "snippet": "FYI the launch window moved to Thursday.",
                "open": f"bxctl sessions show {SESSION} --at 4 --home {home}",
            }
        ],
    }


async def test_no_match_says_so(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await output(capsys, "recall", "zebra", "--home", str(home)) == (
        "no matches for zebra\n"
    )
    out = await output(capsys, "recall", "zebra", "--json", "--home", str(home))
    assert json.loads(out)["hits"] == []


async def test_the_owners_recall_leaves_no_recall_log_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await output(capsys, "recall", "launch", "--home", str(home))
    assert not list((home / "memory").glob("recalls/*.jsonl"))


def test_a_long_snippet_is_shown_whole_on_its_line() -> None:
    """Nothing of memoryd's snippet is refolded: the terminal wraps it."""
    source = proto.HitSource(
        kind="session",
        session=SESSION,
        epoch=2,
        record=7,
        time="2026-09-20T14:02:11Z",
        role="tool_call",
        class_="public",
        untrusted=True,
    )
    hit = proto.RecallHit(
        source=source, label=proto.Label(class_=Class.public, untrusted=True), snippet="word " * 99
    )
    answer = entries.recall_answer("word", [hit], lambda hit: "open it")
    assert entries.to_terminal(answer).split("\n") == [
        f"[1] session {SESSION}, 2026-09-20 14:02 UTC",
        "    the assistant called · public · untrusted",
        "    " + "word " * 99,  # exactly, its last space too
        "    open: open it",
    ]
    assert entries.at_text(source) == "2:7"


# -- sessions show --at, on its own -------------------------------------------------------

DAMAGED: list[Record | bytes] = [*CONVERSATION[:3], b'{"type": "user"}', *CONVERSATION[3:]]
"""CONVERSATION with a damaged line as record 3: records keep their line's place."""


@pytest.fixture
def plain(short_dir: Path) -> Path:
    home = short_dir / "p"
    (home / "config").mkdir(parents=True)
    write_session(home, SESSION, log=log(DAMAGED))
    return home


async def test_at_with_around_shows_that_many_either_side(
    plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await output(
        capsys, "sessions", "show", SESSION[:9], "--at", "3", "--around", "1", "--home", str(plain)
    )
    assert out == (
        f"session {SESSION}, created 2026-11-30T08:00:00Z, model m\n"
        "records 2 to 4 (of 8, from 0); > marks 3\n"
        "\n"
        "  #2 [2026-09-20T14:01:11Z] owner:\n"
        "  What is on today?\n"
        "\n"
        "> #3 (line 4 is not a session record: object missing required field `time`)\n"
        "\n"
        "  #4 [2026-09-20T14:01:30Z] assistant:\n"
        "  Two meetings and the Heron review.\n"
    )
    edge = await output(capsys, "sessions", "show", SESSION, "--at", "0", "--home", str(plain))
    assert "records 0 to 3 (of 8, from 0); > marks 0\n" in edge


async def test_at_json_gives_the_window_with_its_records(
    plain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sessions", "show", SESSION, "--at", "7", "--around", "1", "--json"]
    window = json.loads(await output(capsys, *argv, "--home", str(plain)))
    assert window == {
        "session": SESSION,
        "epoch": 0,
        "at": 7,
        "records": 8,
        "lines": [
            {
                "record": 6,
                "entry": {
                    "type": "assistant",
                    "time": "2026-09-20T14:02:30Z",
                    "content": "Noted: the launch window is now Thursday.",
                    "reasoning_content": None,
                    "tool_calls": [],
                    "tokens": None,
                },
            },
            {
                "record": 7,
                "at": True,
                "entry": {"type": "user", "time": "2026-09-20T14:03:11Z", "content": "Thanks."},
            },
        ],
    }


async def test_an_assistant_record_with_calls_is_marked_whole(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = short_dir / "c"
    (home / "config").mkdir(parents=True)
    call = ToolCall(id="c1", name="clock", arguments="{}")
    records: list[Record] = [
        AssistantRecord(time="2026-09-20T14:02:30Z", content="Let me look.", tool_calls=[call]),
        ToolResultRecord(time="2026-09-20T14:02:31Z", call_id="c1", name="clock", content="14:02"),
    ]
    write_session(home, SESSION, log=log(records))
    out = await output(
        capsys, "sessions", "show", SESSION, "--at", "0", "--around", "0", "--home", str(home)
    )
    assert out.split("\n")[1:] == [
        "records 0 to 0 (of 2, from 0); > marks 0",
        "",
        "> #0 [2026-09-20T14:02:30Z] assistant:",
        "> Let me look.",
        ">",
        "> [2026-09-20T14:02:30Z] assistant called clock {}",
        "",
    ]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--at", "8"],
            f"session {SESSION} has no record 8: it has records 0 to 7",
        ),
        (
            ["--at", "1:0"],
            f"session {SESSION} has no epoch 1; its epochs: 0",
        ),
        (
            ["--at", "twelve"],
            "--at twelve names no record: a record is its number as `bxctl recall` prints "
            "it: RECORD (such as 12) or EPOCH:RECORD (such as 1:12), counted from 0",
        ),
        (["--at", "-1"], "--at -1 names no record: a record is its number as"),
        (
            ["--at", "2", "--around", "-1"],
            "--around is how many records either side, 0 or more; -1 is not",
        ),
        (
            ["--around", "2"],
            "--around says how many records around --at to show; give --at too",
        ),
        (
            ["--at", "2", "--baseline"],
            "--baseline shows the memory block, not records; drop --at",
        ),
    ],
)
async def test_a_record_that_is_not_there_is_refused_naming_the_range(
    plain: Path, argv: list[str], error: str
) -> None:
    with pytest.raises(CommandError) as refused:
        await run("sessions", "show", SESSION, *argv, "--home", str(plain))
    assert str(refused.value).startswith(error)


async def test_a_session_without_records_says_so(short_dir: Path) -> None:
    home = short_dir / "e"
    (home / "config").mkdir(parents=True)
    write_session(home, SESSION)
    (home / "sessions" / SESSION / proto.LOG_FILE).unlink()
    with pytest.raises(CommandError) as refused:
        await run("sessions", "show", SESSION, "--at", "0", "--home", str(home))
    assert str(refused.value) == f"session {SESSION} has no record 0: it has no records yet"
