"""Issue 12, item 2: every bxctl command shows outside text inert, and exactly.

Each command runs in-process against a test double of its role on the real socket (or
against files in a home), fed hostile text in every field that comes from a model, a
tool, a log file, memory or the index. What it prints holds no raw control, escape
sequence, bidi or invisible code point, and undoing the terminal rendering of what it
printed gives back the exact text.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import msgspec
import pytest
import trio
from bxctl_run import Handler, run, serve
from security.hostile import (
    HOSTILE,
    ROBIN,
    SHORT_HOSTILE,
    SMUGGLED,
    assert_inert,
    assert_shows,
    unselect,
)

import proto
from bxctl import app
from bxctl._common import program
from proto import (
    ApprovalDecide,
    ApprovalPending,
    Approvals,
    AssistantRecord,
    AssistantText,
    AuditRecordV1,
    AuditVerified,
    BaselinePreviewReply,
    Class,
    GrantInfo,
    GrantProblem,
    Grants,
    Label,
    MemoryBlockReply,
    MemoryHistoryReply,
    Message,
    Ok,
    PendingApproval,
    SessionOpened,
    ToolCall,
    ToolCalled,
    ToolResult,
    ToolResultRecord,
    TurnDone,
    UserRecord,
)

CAP_S = 30
SESSION = "chat-abcdefgh"


def printed(capsys: pytest.CaptureFixture[str], *, stderr: bool = True) -> str:
    """What the command printed (stdout, then stderr unless not asked), checked inert."""
    out, err = capsys.readouterr()
    assert_inert(out)
    assert_inert(err)
    return out + err if stderr else out


def approval_block(output: str) -> str:
    """The arguments an approval showed: its indented block, as shown."""
    lines = output.split("\n")
    start = lines.index("  arguments:") + 1
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block)


def approval_arguments(output: str) -> str:
    """The arguments an approval showed, the rendering undone."""
    return proto.from_terminal(approval_block(output))


def hostile_approval(arguments: str = HOSTILE) -> PendingApproval:
    return PendingApproval(
        id="ap-k3f9xy",
        session=SESSION,
        call_id="call_1",
        tool="memory",
        arguments=arguments,
        taint=Label(untrusted=True),
        time=SHORT_HOSTILE,
    )


def pieces(text: str) -> list[str]:
    """`text` cut as a model streams it: every few characters, and after each backslash."""
    out, start = [], 0
    for i, char in enumerate(text):
        if char == "\\" or i - start >= 6:
            out.append(text[start : i + 1])
            start = i + 1
    return [*out, text[start:]]


# -- approvals -----------------------------------------------------------------------


async def test_approvals_list_shows_the_exact_arguments(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        return Approvals(pending=[hostile_approval()])

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("approvals", "list", "--home", str(short_dir)) == 0
    out = printed(capsys)
    assert approval_arguments(out) == HOSTILE
    assert_shows(out, SHORT_HOSTILE, one_line=True)
    assert out.count("\n") == HOSTILE.count("\n") + 4  # no line but the text's own
    assert await run("approvals", "list", "--json", "--home", str(short_dir)) == 0
    listed = json.loads(printed(capsys))
    assert listed[0]["arguments"] == HOSTILE
    assert listed[0]["time"] == SHORT_HOSTILE


async def test_the_issues_example_shows_every_selector_in_the_list(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = json.dumps(
        {"action": "add", "file": "user", "text": ROBIN}, ensure_ascii=False, separators=(",", ":")
    )

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        return Approvals(pending=[hostile_approval(arguments)])

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("approvals", "list", "--home", str(short_dir)) == 0
    out = printed(capsys)
    assert '"text":"Name: Robin\\u{e0162}\\u{e0165}' in out
    assert out.count("\\u{e01") == 16
    assert approval_arguments(out) == arguments
    assert unselect(approval_arguments(out)) == SMUGGLED.encode()


# -- chat ----------------------------------------------------------------------------


def fake_loopd(events: list[Message], *, waits: trio.Event | None = None) -> Handler:
    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.SessionOpen):
            return SessionOpened(session=SESSION, created=True)
        if isinstance(request, proto.BaselinePreview):
            raise proto.ServiceError("internal", "no preview here")
        assert isinstance(request, proto.Say)
        for event in events:
            await conn.send(event)
            if isinstance(event, ApprovalPending) and waits is not None:
                await waits.wait()
        return TurnDone(text="done")

    return loopd


CALL = ToolCall(id=SHORT_HOSTILE, name=SHORT_HOSTILE, arguments=HOSTILE)
RESULT_LINE = "\x1b[2J\x1b]52;c;eA==\x07\u202e" + ROBIN + "\\u{1b}"


def turn_events() -> list[Message]:
    return [
        *(AssistantText(text=piece) for piece in pieces(HOSTILE)),
        ToolCalled(call=CALL),
        ToolResult(call=CALL, status="ok", content=RESULT_LINE + "\nsecond line", label=Label()),
        ApprovalPending(approval=hostile_approval()),
    ]


def check_turn(out: str) -> None:
    assert_shows(out, HOSTILE)  # the assistant's text, streamed in pieces
    assert f"  → {proto.for_terminal(SHORT_HOSTILE, one_line=True)} " in out
    assert_shows(out, HOSTILE, one_line=True)  # the call's arguments
    assert f"  ← ok: {proto.for_terminal(RESULT_LINE, one_line=True)}\n" in out
    assert approval_arguments(out) == HOSTILE


async def test_chat_shows_model_text_tool_calls_and_approvals_inert(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await serve(nursery, short_dir, proto.OWNER_LOOP, fake_loopd(turn_events()))
    assert await run("chat", "--message", "hi", "--home", str(short_dir)) == 0
    out = printed(capsys)
    check_turn(out)
    approve = f"{program()} approvals approve ap-k3f9xy --home {short_dir}"  # as it is run
    assert f"  waiting for the owner: `{approve}`" in out  # pasteable as it is


async def test_chat_asks_inline_with_the_exact_arguments(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decided = trio.Event()
    decisions: list[ApprovalDecide] = []

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        assert isinstance(request, ApprovalDecide)
        decisions.append(request)
        decided.set()
        return Ok()

    await serve(nursery, short_dir, proto.OWNER_LOOP, fake_loopd(turn_events(), waits=decided))
    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"hello\nn\n")))
    assert await run("chat", "--home", str(short_dir)) == 0
    out = printed(capsys)
    check_turn(out)
    assert "approve? [y/N, e to edit, or a reason to deny] " in out
    assert decisions == [ApprovalDecide(id="ap-k3f9xy", approve=False)]


async def test_chat_shows_a_turn_error_inert(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.SessionOpen):
            return SessionOpened(session=SESSION, created=True)
        if isinstance(request, proto.BaselinePreview):
            raise proto.ServiceError("internal", "no preview here")
        raise proto.ServiceError("model-error", HOSTILE, runbook=SHORT_HOSTILE)

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    assert await run("chat", "--message", "hi", "--home", str(short_dir)) == 1
    out = printed(capsys)
    line = f"error: {proto.for_terminal(HOSTILE, one_line=True)} (runbook: "
    assert line in out
    assert_shows(out, SHORT_HOSTILE, one_line=True)


@pytest.mark.parametrize("code", ["model-unreachable", "model-timeout"])
async def test_a_model_failures_note_shows_a_hostile_model_url_inert(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    # loopd's config admits any non-space after http://, so the URL in the note is
    # outside text; httpx refuses to fetch it, which is "no model server answers there"
    url = "http://" + SHORT_HOSTILE.replace("\n", "").replace("\r", "") + "/v1"

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.ModelInfo):
            return proto.ModelInfoReply(model="m", url=url)
        if isinstance(request, proto.SessionOpen):
            return SessionOpened(session=SESSION, created=True)
        if isinstance(request, proto.BaselinePreview):
            raise proto.ServiceError("internal", "no preview here")
        raise proto.ServiceError(code, "the model server failed", runbook="model-unavailable")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    assert await run("chat", "--message", "hi", "--home", str(short_dir)) == 1
    out = printed(capsys)
    assert "note: no model server answers at http://" in out
    assert_shows(out, url, one_line=True)


# -- memoryd's answers ---------------------------------------------------------------


async def test_recall_and_memory_show_render_hits_and_the_block(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = proto.HitSource(
        kind="session",
        session=SHORT_HOSTILE,
        epoch=0,
        record=1,
        time=SHORT_HOSTILE,
        role=SHORT_HOSTILE,
        class_="private",
        untrusted=False,
    )
    hit = proto.RecallHit(source=source, label=proto.Label(), snippet=HOSTILE)

    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.MemoryBlock):
            return MemoryBlockReply(text="# user.md (1 of 1,375 characters)\n" + HOSTILE)
        return proto.OwnerRecalled(hits=[hit], label=proto.Label())

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    await serve(nursery, short_dir, proto.LOOP_MEMORY, memoryd)
    assert await run("recall", "robin", "--home", str(short_dir)) == 0
    out = printed(capsys)  # nothing of the source or the snippet raw on the screen
    assert out.startswith("[1] session ")  # no Markdown backslashes on a terminal
    for part in HOSTILE.split("\n"):  # the snippet's lines, each indented under its hit
        assert_shows(out, part)
    assert await run("memory", "show", "--home", str(short_dir)) == 0
    out = printed(capsys)
    assert out.startswith("# user.md (1 of 1,375 characters)\n")
    assert_shows(out, HOSTILE)


async def test_memory_history_renders_entries_and_fields(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit = proto.AppliedEdit(
        time=SHORT_HOSTILE,
        session=SHORT_HOSTILE,
        call=SHORT_HOSTILE,
        approval=SHORT_HOSTILE,
        action="consolidate",  # the action and file are checked when the reply is read
        file="memory.md",
        before=[HOSTILE],
        after=[ROBIN],
        moved=[HOSTILE],
    )

    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        return MemoryHistoryReply(edits=[proto.HistoryEdit(id=SHORT_HOSTILE, line=edit)])

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    assert await run("memory", "history", "--home", str(short_dir)) == 0
    out = printed(capsys)
    assert_shows(out, SHORT_HOSTILE, one_line=True)
    moved = [line[6:] for line in out.split("\n") if line.startswith("    > ")]
    assert proto.from_terminal("\n".join(moved)) == HOSTILE
    assert f"    + {proto.for_terminal(ROBIN)}\n" in out
    assert await run("memory", "history", "--json", "--home", str(short_dir)) == 0
    (shown,) = msgspec.json.decode(printed(capsys), type=list[dict[str, object]])
    assert shown.pop("id") == SHORT_HOSTILE
    assert msgspec.convert(shown, proto.JournalLine) == edit


# -- brokerd's answers ---------------------------------------------------------------


async def test_grants_quote_file_names_and_problems_inert(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reply = Grants(
        grants=[
            GrantInfo(
                name=SHORT_HOSTILE,
                tool=SHORT_HOSTILE,
                mode="ask",
                max_taint=Class.private,
                result_class=Class.private,
                untrusted=True,
                grant_sha256="ab" * 32,
            )
        ],
        problems=[GrantProblem(file=SHORT_HOSTILE + ".toml", message=HOSTILE)],
    )

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.AuditVerify):
            return AuditVerified(records=3, ok=False, broken_at=SHORT_HOSTILE)
        return reply

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    assert await run("grants", "--home", str(short_dir)) == 1
    out = printed(capsys)
    assert_shows(out, SHORT_HOSTILE, one_line=True)
    assert_shows(out, HOSTILE, one_line=True)
    assert out.count("\n") == 2
    assert await run("grants", "--json", "--home", str(short_dir)) == 0
    assert json.loads(printed(capsys))["problems"][0]["message"] == HOSTILE
    assert await run("audit", "verify", "--home", str(short_dir)) == 1
    assert_shows(printed(capsys), SHORT_HOSTILE, one_line=True)


# -- loopd's answers -----------------------------------------------------------------


async def test_baseline_renders_the_prompt_and_the_schemas(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def loopd(request: Message, conn: proto.Connection) -> Message:
        return BaselinePreviewReply(
            system="# soul.md\n" + HOSTILE,
            tools=[{"type": "function", "description": HOSTILE}],
            model="m",
            model_url="http://127.0.0.1:9/v1",
        )

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    assert await run("baseline", "--home", str(short_dir)) == 0
    out = printed(capsys)
    assert out.startswith("# soul.md\n")
    assert_shows(out, HOSTILE)
    assert await run("baseline", "--json", "--home", str(short_dir)) == 0
    shown = json.loads(printed(capsys))
    assert shown["system"] == "# soul.md\n" + HOSTILE
    assert shown["tools"][0]["description"] == HOSTILE


# -- files in the home ---------------------------------------------------------------


def write_session(home: Path) -> None:
    directory = home / "sessions" / SESSION
    directory.mkdir(parents=True)
    baseline = proto.Baseline(
        session=SESSION,
        epoch=0,
        created="2026-11-30T08:00:00Z",
        model=SHORT_HOSTILE,
        system=HOSTILE,
        tools=[],
    )
    (directory / proto.BASELINE_FILE).write_bytes(msgspec.json.encode(baseline))
    records: list[proto.SessionRecord] = [
        UserRecord(time="2026-11-30T08:00:01Z", content=HOSTILE),
        AssistantRecord(
            time=SHORT_HOSTILE,
            content=HOSTILE,
            tool_calls=[ToolCall(id=SHORT_HOSTILE, name=SHORT_HOSTILE, arguments=HOSTILE)],
        ),
        ToolResultRecord(
            time="2026-11-30T08:00:03Z",
            call_id=SHORT_HOSTILE,
            name=SHORT_HOSTILE,
            content=HOSTILE,
            class_=Class.public,
            untrusted=True,
        ),
    ]
    lines = b"".join(msgspec.json.encode(r) + b"\n" for r in records)
    (directory / proto.LOG_FILE).write_bytes(lines + b'{"type":"user","content":"\x1b[2J')
    (home / "sessions" / "chat-\x1b[2J\u202eevil").mkdir()


def test_sessions_list_and_show_render_the_records(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_session(short_dir)
    (short_dir / "config").mkdir(exist_ok=True)
    assert app(["sessions", "list", "--home", str(short_dir)], result_action="return_value") == 0
    out = printed(capsys)
    assert "chat-abcdefgh  created 2026-11-30T08:00:00Z      3 records" in out
    assert_shows(out, "chat-\x1b[2J\u202eevil", one_line=True)
    argv = ["sessions", "show", SESSION, "--home", str(short_dir)]
    assert app(argv, result_action="return_value") == 0
    out = printed(capsys)
    assert_shows(out, SHORT_HOSTILE, one_line=True)  # the model's name, a tool's name
    assert f"] owner:\n{proto.for_terminal(HOSTILE)}\n" in out
    assert f"] assistant:\n{proto.for_terminal(HOSTILE)}\n" in out
    assert_shows(out, HOSTILE, one_line=True)  # the call's arguments
    assert f"untrusted:\n{proto.for_terminal(HOSTILE[:2000])}\n… (" in out
    assert app([*argv, "--json"], result_action="return_value") == 0
    assert json.loads(printed(capsys, stderr=False))[0]["content"] == HOSTILE


def test_audit_tail_renders_the_records(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = AuditRecordV1(
        time=SHORT_HOSTILE,
        session=SHORT_HOSTILE,
        call=SHORT_HOSTILE,
        tool=SHORT_HOSTILE,
        arguments=HOSTILE,
        grant=SHORT_HOSTILE,
        grant_sha256=None,
        decision="auto",
        approval=None,
        label=Label(),
        status="ok",
        reason=HOSTILE,
    )
    (short_dir / "config").mkdir(exist_ok=True)
    audit = short_dir / "audit"
    audit.mkdir()
    (audit / "2026-11.jsonl").write_bytes(
        msgspec.json.encode(record) + b"\n\x1b[2J\xe2\x80\xae not a record\n"
    )
    assert app(["audit", "tail", "--home", str(short_dir)], result_action="return_value") == 0
    out = printed(capsys)
    assert_shows(out, SHORT_HOSTILE, one_line=True)
    argv = ["audit", "tail", "--json", "--home", str(short_dir)]
    assert app(argv, result_action="return_value") == 0
    assert msgspec.json.decode(printed(capsys, stderr=False), type=list[AuditRecordV1]) == [record]


# -- errors and `bxctl up` -----------------------------------------------------------


async def test_a_roles_error_message_is_one_inert_line(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        raise proto.ServiceError("internal", HOSTILE, runbook=SHORT_HOSTILE)

    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    (short_dir / "config").mkdir(exist_ok=True)
    with trio.fail_after(CAP_S):
        done = await trio.run_process(
            [sys.executable, "-m", "bxctl", "recall", "x", "--home", str(short_dir)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    err = done.stderr.decode()
    assert done.returncode == 1
    assert_inert(err)
    assert err.count("\n") == 1
    assert_shows(err, HOSTILE, one_line=True)


async def test_up_streams_role_log_lines_inert(capsys: pytest.CaptureFixture[str]) -> None:
    from bxctl._up import _spawn

    data = HOSTILE.encode() + b"\n\xff\xfe not utf-8 \x1b[2J\n"
    script = f"import sys; sys.stderr.buffer.write({data!r}); sys.stderr.flush()"
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            child = await _spawn(nursery, "brokerd", [sys.executable, "-c", script], {})
    assert child.process.returncode == 0
    err = printed(capsys)
    for line in HOSTILE.split("\n"):
        assert f"brokerd | {proto.for_terminal(line, one_line=True)}\n" in err
    assert "brokerd | \ufffd\ufffd not utf-8 \\u{1b}[2J\n" in err
