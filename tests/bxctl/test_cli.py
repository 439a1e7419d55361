"""bxctl against test doubles of the roles on real sockets, and against a home's files."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from bxctl_run import run, serve, write_session
from hypothesis import given
from hypothesis import strategies as st
from scripted_model import Step, serve_scripted_model

import proto
from bxctl import CommandError, app
from bxctl._common import not_utf8
from proto import (
    AppliedEdit,
    ApprovalDecide,
    Approvals,
    BaselinePreviewReply,
    HistoryEdit,
    Label,
    MemoryHistoryReply,
    Message,
    Ok,
    PendingApproval,
    Reindexed,
)

CAP_S = 20


async def test_reindex_prints_the_spec_line(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Message] = []

    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        seen.append(request)
        return Reindexed(logs=42, records=1208, archive=7)

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    assert await run("reindex", "--home", str(short_dir)) == 0
    out, err = capsys.readouterr()
    assert out == "reindexed: 42 logs, 1,208 records, 7 archive entries\n"
    # stderr is not a terminal: one plain line, no spinner, then the time it took
    assert re.fullmatch(r"reindexing…\ntook \d+\.\d s\n", err)
    assert seen == [proto.Reindex()]


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("fails", [False, True])
async def test_reindex_on_a_terminal_spins_then_clears_the_line(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str], fails: bool
) -> None:
    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        if fails:
            return proto.Error(code="internal", message="disk full")
        return Reindexed(logs=42, records=1208, archive=7)

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    terminal = Terminal()
    with contextlib.redirect_stderr(terminal):
        if fails:
            with pytest.raises(CommandError, match="memoryd refused: disk full"):
                await run("reindex", "--home", str(short_dir))
        else:
            assert await run("reindex", "--home", str(short_dir)) == 0
    shown = terminal.getvalue()
    assert re.search(r"reindexing… +\d+\.\d s", shown)
    # the cursor is shown again and the spinner's line erased after its last frame
    assert shown.rindex("\x1b[?25h") > shown.rindex("reindexing…")
    after = shown[shown.rindex("\x1b[2K") + len("\x1b[2K") :]  # after the last frame
    out = capsys.readouterr().out
    if fails:
        assert after == ""
        assert out == ""
    else:
        assert re.fullmatch(r"took \d+\.\d s\n", after)
        assert out == "reindexed: 42 logs, 1,208 records, 7 archive entries\n"


async def test_reindex_with_an_explicit_admin_socket(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        return Reindexed(logs=1, records=1, archive=1)

    other = short_dir / "elsewhere"
    await serve(nursery, other, proto.OWNER_MEMORY, memoryd)
    path = proto.OWNER_MEMORY.default_path(other)
    assert await run("reindex", "--admin-socket", str(path), "--home", "/nonexistent") == 0
    assert "reindexed: 1 log, 1 record, 1 archive entry" in capsys.readouterr().out


async def test_recall_names_each_hit_whole_with_the_command_that_opens_it(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = proto.HitSource(
        kind="session",
        session="chat-k6m5ert76psohrmw5uwb2ibpb4",
        epoch=0,
        record=12,
        time="2026-09-20T14:02:11Z",
        role="user",
        class_="private",
        untrusted=False,
    )

    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        assert request == proto.OwnerRecall(query="launch window", k=3)
        hit = proto.RecallHit(source=source, label=proto.Label(), snippet="the launch moved")
        return proto.OwnerRecalled(hits=[hit], label=proto.Label())

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    assert await run("recall", "launch window", "-k", "3", "--home", str(short_dir)) == 0
    assert capsys.readouterr().out == (
        "[1] session chat-k6m5ert76psohrmw5uwb2ibpb4, 2026-09-20 14:02 UTC\n"
        "    the owner said · private\n"
        "    the launch moved\n"
        "    open: bxctl sessions show chat-k6m5ert76psohrmw5uwb2ibpb4 --at 12 "
        f"--home {short_dir}\n"
    )


async def test_memory_history_shows_newest_first_as_a_diff(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        AppliedEdit(
            time="2026-09-24T20:14:03Z",
            session="chat-aaaaaaaa",
            call="c1",
            approval="ap1",
            action="add",
            file="memory.md",
            before=[],
            after=["one"],
        ),
        AppliedEdit(
            time="2026-09-25T08:00:00Z",
            session="chat-bbbbbbbb",
            call="c2",
            approval="ap2",
            action="consolidate",
            file="memory.md",
            before=["one", "two"],
            after=["two", "three"],
            moved=["one"],
        ),
    ]

    edits = [HistoryEdit(id=proto.edit_id(line), line=line) for line in lines]

    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        return MemoryHistoryReply(edits=edits)

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    assert await run("memory", "history", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert out.index("2026-09-25T08:00:00Z") < out.index("2026-09-24T20:14:03Z")
    assert "    > one\n" in out  # moved to the archive
    assert "    + three\n" in out
    assert "    + one\n" in out  # the first edit added it


async def test_approvals_list_and_decide(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions: list[ApprovalDecide] = []
    pending = PendingApproval(
        id="k3f9",
        session="chat-abcdefgh",
        call_id="call_1",
        tool="memory",
        arguments='{"action":"add","text":"@all <b>\u202e"}',
        taint=Label(untrusted=True),
        time="2026-11-30T08:00:00Z",
    )

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.ApprovalsList):
            return Approvals(pending=[pending])
        assert isinstance(request, ApprovalDecide)
        decisions.append(request)
        return Ok()

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("approvals", "list", "--home", str(short_dir)) == 0
    listed = capsys.readouterr().out
    assert "approval k3f9: memory in session chat-abcdefgh" in listed
    assert "this session has seen untrusted content" in listed
    assert '{"action":"add","text":"@all <b>\\u{202e}"}' in listed  # raw, bidi revealed
    assert await run("approvals", "list", "--json", "--home", str(short_dir)) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == "k3f9"
    assert (
        await run("approvals", "deny", "k3f9", "--reason", "not now", "--home", str(short_dir)) == 0
    )
    assert decisions == [ApprovalDecide(id="k3f9", approve=False, reason="not now")]


async def test_approvals_list_asks_for_the_approvals_a_full_frame_left_out(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def pending(approval_id: str) -> PendingApproval:
        return PendingApproval(
            id=approval_id,
            session="chat-abcdefgh",
            call_id="call_1",
            tool="memory",
            arguments='{"action":"add","file":"memory","text":"' + approval_id + '"}',
            taint=Label(),
            time="2026-11-30T08:00:00Z",
        )

    asked: list[proto.ApprovalsList] = []

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        assert isinstance(request, proto.ApprovalsList)
        asked.append(request)
        if request.ids is None:
            return Approvals(pending=[pending("ap-first")], more=["ap-gone", "ap-third"])
        # ap-gone was settled meanwhile: brokerd sends only those still pending
        return Approvals(pending=[pending("ap-third")])

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("approvals", "list", "--home", str(short_dir)) == 0
    listed = capsys.readouterr().out
    assert "approval ap-first" in listed
    assert "approval ap-third" in listed
    assert "ap-gone" not in listed
    assert asked == [proto.ApprovalsList(), proto.ApprovalsList(ids=["ap-gone", "ap-third"])]


async def test_a_role_not_running_is_one_clear_error(short_dir: Path) -> None:
    with pytest.raises(CommandError) as error:
        await run("memory", "show", "--home", str(short_dir))
    message = str(error.value)
    assert f"cannot reach memoryd at {short_dir}/run/owner-memory/admin.sock" in message
    assert "bxctl up" in message


def test_errors_are_one_line_without_a_traceback(short_dir: Path) -> None:
    (short_dir / "config").mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "bxctl", "approvals", "list", "--home", str(short_dir)],
        capture_output=True,
        text=True,
        timeout=CAP_S,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("bxctl: cannot reach brokerd")
    assert "Traceback" not in done.stderr


def test_an_argument_that_is_not_utf8_is_refused_before_anything_is_sent(
    short_dir: Path,
) -> None:
    # bytes straight from the OS, as a shell passes $'caf\xe9'; the home may hold any bytes
    home = os.fsencode(short_dir) + b"/h\xff"
    done = subprocess.run(
        [sys.executable, "-m", "bxctl", "--home", home, "chat", "-m", b"caf\xe9 au lait"],
        capture_output=True,
        timeout=CAP_S,
    )
    assert done.returncode == 1
    assert done.stderr == (
        b"bxctl: argument 3 is not UTF-8 text (byte 0xe9 at byte 4): boxmaker's messages, "
        b"queries, ids and reasons are UTF-8; nothing was sent\n"
    )
    assert not (short_dir / os.fsdecode(b"h\xff")).exists()


@given(st.binary(max_size=40))
def test_not_utf8_names_the_first_byte_a_decoder_refuses(data: bytes) -> None:
    found = not_utf8(data.decode(errors="surrogateescape"))
    refused: int | None = None
    try:
        data.decode()
    except UnicodeDecodeError as exc:
        refused = exc.start
    expected = None if refused is None else f"byte 0x{data[refused]:02x} at byte {refused + 1}"
    assert found == expected


async def test_baseline_counts_tokens_with_the_model_server(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_scripted_model(Step(text="x", usage=1234)) as model:

        async def loopd(request: Message, conn: proto.Connection) -> Message:
            return BaselinePreviewReply(
                system="You are boxmaker.",
                tools=[{"type": "function"}],
                model="m",
                model_url=model.url,
            )

        await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
        assert await run("baseline", "--count", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert out.startswith("You are boxmaker.\n")
    assert "system prompt: 17 characters" in out
    assert "tokens: 1,224 (usage.prompt_tokens of a one-token completion)" in out
    assert model.request_json(-1)["max_tokens"] == 1


async def test_baseline_estimate_is_labelled(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def loopd(request: Message, conn: proto.Connection) -> Message:
        return BaselinePreviewReply(
            system="x" * 400, tools=[], model="m", model_url="http://127.0.0.1:9/v1"
        )

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    assert await run("baseline", "--count", "--home", str(short_dir)) == 0
    assert "tokens: 100 (ESTIMATE (characters / 4)" in capsys.readouterr().out


def test_init_creates_a_home_once_and_never_overwrites(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = short_dir / "home"
    assert (
        app(
            [
                "init",
                "--home",
                str(home),
                "--model-url",
                "http://10.0.0.5:8000/v1",
                "--model",
                "qwen",
            ],
            result_action="return_value",
        )
        == 0
    )
    loopd_toml = (home / "config" / "loopd.toml").read_text()
    assert f'home = "{home}"' in loopd_toml
    assert 'url = "http://10.0.0.5:8000/v1"' in loopd_toml
    assert 'model = "qwen"' in loopd_toml
    for name in ("memoryd.toml", "brokerd.toml"):
        assert f'home = "{home}"' in (home / "config" / name).read_text()
    assert (home / "config" / "soul.md").read_text() == (
        Path(__file__).parents[2] / "config" / "soul.md"
    ).read_text()
    assert list((home / "grants").glob("*.toml"))
    (home / "config" / "soul.md").write_text("mine")
    capsys.readouterr()
    assert app(["init", "--home", str(home)], result_action="return_value") == 0
    assert "already a boxmaker home; nothing to do" in capsys.readouterr().out
    assert (home / "config" / "soul.md").read_text() == "mine"


def test_sessions_list_and_show_read_the_files(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (short_dir / "config").mkdir(exist_ok=True)
    write_session(
        short_dir,
        "chat-abcdefghij",
        log=b'{"type":"user","time":"2026-11-30T08:00:01Z","content":"hello @here"}\n'
        b'{"type":"tool_result","time":"2026-11-30T08:00:02Z","call_id":"1","name":"http_fetch",'
        b'"content":"page","class":"public","untrusted":true}\n'
        b'{"type":"assist',
    )
    assert app(["sessions", "list", "--home", str(short_dir)], result_action="return_value") == 0
    listed = capsys.readouterr().out
    assert "chat-abcdefghij  created 2026-11-30T08:00:00Z      2 records" in listed
    assert (
        app(
            ["sessions", "show", "chat-abcdefghij", "--home", str(short_dir)],
            result_action="return_value",
        )
        == 0
    )
    shown = capsys.readouterr().out
    assert "hello @here" in shown  # no Markdown escaping on a terminal
    assert "http_fetch result · public · untrusted" in shown
    with pytest.raises(CommandError, match=r"no session \.\./\.\./etc in .*bxctl sessions list"):
        app(
            ["sessions", "show", "../../etc", "--home", str(short_dir)],
            result_action="return_value",
        )


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["init"],
        ["up"],
        ["chat"],
        ["approvals"],
        ["approvals", "deny"],
        ["reindex"],
        ["grants"],
        ["recall"],
        ["memory", "show"],
        ["memory", "history"],
        ["memory", "add"],
        ["memory", "replace"],
        ["memory", "remove"],
        ["memory", "forget"],
        ["memory", "why"],
        ["memory", "undo"],
        ["approvals", "approve"],
        ["baseline"],
        ["audit", "verify"],
        ["audit", "tail"],
        ["sessions", "list"],
        ["sessions", "show"],
        ["backup"],
    ],
)
def test_every_command_has_help(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bxctl", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=CAP_S,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: bxctl" in done.stdout
    assert len(done.stdout.splitlines()) >= 4


async def test_grants_lists_loaded_grants_and_refused_files(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        assert isinstance(request, proto.GrantsList)
        return proto.Grants(
            grants=[
                proto.GrantInfo(
                    name="builtin-memory",
                    tool="memory",
                    mode="ask",
                    max_taint=proto.Class.secret,
                    result_class=proto.Class.private,
                    untrusted=False,
                    grant_sha256="ab" * 32,
                    builtin=True,
                )
            ],
            problems=[
                proto.GrantProblem(
                    file="mine.toml",
                    message="the policy of recall and memory is built in; remove this grant.",
                )
            ],
        )

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("grants", "--home", str(short_dir)) == 1
    out = capsys.readouterr().out
    assert (
        "builtin-memory       memory      ask, max_taint secret, result private  (built in)" in out
    )
    assert (
        "REFUSED mine.toml: the policy of recall and memory is built in; remove this "
        "grant. (runbook: grants-invalid)"
    ) in out


async def test_audit_verify_reports_each_forget(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forgets = [
        proto.ForgetOnRecord(
            plan="fg-aaaaaaaaaaaa",
            time="2026-12-06T09:00:00Z",
            surface=proto.Surface(via="bxctl", uid=1000),
            records=3,
        ),
        proto.ForgetOnRecord(plan="fg-bbbbbbbbbbbb", time="2026-12-07T10:00:00Z", records=1),
    ]

    async def brokerd(request: proto.Message, conn: proto.Connection) -> proto.Message:
        return proto.AuditVerified(records=9, ok=True, forgets=forgets)

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("audit", "verify", "--home", str(short_dir)) == 0
    shown = capsys.readouterr()
    assert re.fullmatch(r"checked in \d+\.\d\d s \([\d,]+ records/s\)\n", shown.err)  # no spinner
    assert shown.out.splitlines() == [
        "audit log intact: 9 records",
        "forgotten on 2026-12-06 by the owner (bxctl): 3 records",
        "forgotten on 2026-12-07 by the owner: 1 record",
    ]
