"""Forget in bxctl (issue 31): its own file, `chat_history`, and `memory forget` / `/forget`.

brokerd's part is a double here (its owner socket answering the preview and the forget):
what is bxctl's is the chat's input history (scrubbed, never holding a command line), the
preview and y/N on the terminal, and that nothing printed after a forget quotes the text.
"""

from __future__ import annotations

import datetime
import io
import json
import sys
from pathlib import Path

import msgspec
import pytest
import trio
from bxctl_run import run, serve
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prompt_toolkit.history import FileHistory

import entries
import proto
from bxctl import CommandError, app
from bxctl._chat import _Conversation, _Session
from bxctl._history import (
    HISTORY_FILE,
    chunks,
    entry_bytes,
    forget_in_file,
    history_texts,
    scrub,
)
from bxctl._memory import BXCTL, OwnFiles
from bxctl._prompt_history import PromptHistory
from proto import (
    AssistantText,
    Forget,
    ForgetEntry,
    ForgetPreview,
    ForgetPreviewed,
    Forgotten,
    Holding,
    Message,
    TurnDone,
)

SECRET = "ZEBRA-7731"
SESSION = "chat-abcdefghijkl"
PLAN = "fg-abcdefghijkl"
TIME = datetime.datetime(2026, 12, 5, 10, 30)


def lines_of(data: bytes) -> list[str]:
    """The file's lines as prompt_toolkit reads them: split at newlines, each decoded."""
    return [line.decode(errors="replace") for line in data.split(b"\n")]


def history_file(path: Path, *entries: str) -> bytes:
    """A chat_history as prompt_toolkit writes it, holding `entries`; its bytes."""
    path.touch()
    history = FileHistory(path)
    for entry in entries:
        history.store_string(entry)
    return path.read_bytes()


def loaded(path: Path) -> list[str]:
    """What prompt_toolkit's own FileHistory loads from `path`, oldest first."""
    return list(reversed(list(FileHistory(path).load_history_strings())))


# -- the file ---------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
NEEDLES = (
    st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=2, max_size=12)
    .map(str.strip)
    .filter(lambda n: proto.forget_problem(n) is None)
)


@st.composite
def entries_and_needle(draw: st.DrawFn) -> tuple[list[str], str]:
    """Entries that often hold the needle, in any case, alone or amid other text."""
    needle = draw(st.one_of(NEEDLES, st.sampled_from([SECRET, "2026", "+ze", "# 2"])))
    piece = st.one_of(
        TEXT,
        st.just(needle),
        st.just(needle.upper()),
        st.just(needle.lower()),
        st.just(needle.swapcase()),
    )
    entry = st.lists(piece, max_size=4).map("".join)
    entries = draw(st.lists(entry, max_size=8))
    return entries, needle


def kept_entries(entries: list[str], needle: str) -> list[str]:
    """The entries none of whose lines (`+` and all) hold `needle`, in order."""
    return [e for e in entries if not any(proto.holds(f"+{x}", needle) for x in e.split("\n"))]


@given(case=entries_and_needle())
@example(case=([f"my code is {SECRET}", "hello", f"two\nlines {SECRET.lower()}", ""], SECRET))
@example(case=(["+zebra", "zebra"], "+ze"))  # held only with the file's own `+`
@example(case=(["a", "b"], "2026-12"))  # held only by the `# <time>` lines
@settings(max_examples=300, deadline=None)
def test_a_forget_leaves_no_line_holding_the_text_and_keeps_the_rest(
    case: tuple[list[str], str],
) -> None:
    entries, needle = case
    data = b"".join(entry_bytes(e, TIME.replace(year=2026 + i % 3)) for i, e in enumerate(entries))
    scrubbed, count = scrub(data, needle)
    assert not [line for line in lines_of(scrubbed) if proto.holds(line, needle)]
    kept = kept_entries(entries, needle)
    assert history_texts(scrubbed) == kept
    dropped = len(entries) - len(kept)
    assert count >= dropped
    assert (count == 0) == (scrubbed == data)
    assert scrub(scrubbed, needle) == (scrubbed, 0)  # a second forget finds nothing


@given(case=entries_and_needle())
@settings(max_examples=50, deadline=None)
def test_the_scrubbed_file_loads_in_prompt_toolkit(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[list[str], str]
) -> None:
    entries, needle = case
    path = tmp_path_factory.mktemp("history") / HISTORY_FILE
    data = history_file(path, *entries)
    assert loaded(path) == entries == history_texts(data)
    scrubbed, _ = scrub(data, needle)
    path.write_bytes(scrubbed)
    assert loaded(path) == history_texts(scrubbed) == kept_entries(entries, needle)


@given(data=st.binary(max_size=200))
@example(data=b"+a\n\n# t\n+b\r\n+c")  # a torn last line, a carriage return kept
def test_any_bytes_read_as_prompt_toolkit_reads_them(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("history") / HISTORY_FILE
    path.write_bytes(data)
    assert b"".join(b"".join(c.head + c.text) for c in chunks(data)) == data
    assert history_texts(data) == loaded(path)


def test_a_multi_line_entry_goes_whole_and_the_rest_stays_byte_for_byte(tmp_path: Path) -> None:
    first, secret, last = (
        entry_bytes("hello", TIME),
        entry_bytes(f"pasted\nthe code {SECRET.lower()}\nand more", TIME),
        entry_bytes("bye", TIME),
    )
    scrubbed, count = scrub(first + secret + last, SECRET)
    assert (scrubbed, count) == (first + last, 1)


# -- the prompt's history ---------------------------------------------------------------


async def strings(history: PromptHistory) -> list[str]:
    """What the prompt would page through, newest first (it loads as the prompt does)."""
    return [item async for item in history.load()]


async def test_the_prompt_keeps_only_what_the_chat_keeps_and_drops_a_forgotten_text(
    tmp_path: Path,
) -> None:
    path = tmp_path / HISTORY_FILE
    history_file(path, f"old {SECRET}", "old hello")
    history = PromptHistory(path)
    assert await strings(history) == ["old hello", f"old {SECRET}"]
    history.append_string("/forget it")  # what the prompt calls on Enter: not kept
    history.keep("new hello")
    history.keep("new hello")  # a repeat of the last is not kept twice
    assert await strings(history) == ["new hello", "old hello", f"old {SECRET}"]
    assert loaded(path) == [f"old {SECRET}", "old hello", "new hello"]

    # another process (`bxctl memory forget`) rewrites the file: the next prompt reloads
    assert forget_in_file(path, SECRET) == 1
    assert f"old {SECRET}" in await strings(history)  # still loaded: the prompt's copy
    history.refresh()
    assert await strings(history) == ["new hello", "old hello"]


async def test_in_memory_only_the_forget_drops_the_messages_themselves() -> None:
    history = PromptHistory(None)
    history.keep(f"a {SECRET.lower()}")
    history.keep("b")
    assert history.unsaved_holding(SECRET) == 1
    assert history.forget(SECRET) == 1
    assert await strings(history) == ["b"]


# -- doubles ----------------------------------------------------------------------------

PREVIEWED = ForgetPreviewed(
    holdings=[
        Holding(store="sessions", count=3, unit="messages", names=[SESSION]),
        Holding(store="journal", count=2, unit="lines"),
    ],
    entries=[ForgetEntry(file="memory", entry=f"Locker code: {SECRET}")],
    near=["the zebra code is 7731"],
)
FORGOTTEN = Forgotten(
    plan=PLAN,
    holdings=[
        Holding(store="sessions", count=3, unit="messages", names=[SESSION]),
        Holding(store="journal", count=2, unit="lines"),
    ],
)


class Roles:
    """brokerd's owner socket for a forget, and loopd's for a chat: what they were asked."""

    def __init__(self) -> None:
        self.asked: list[Message] = []
        self.said: list[str] = []

    async def start(self, nursery: trio.Nursery, home: Path) -> None:
        await serve(nursery, home, proto.OWNER_BROKER, self.brokerd)
        await serve(nursery, home, proto.OWNER_LOOP, self.loopd)

    async def brokerd(self, request: Message, conn: proto.Connection) -> Message:
        self.asked.append(request)
        match request:
            case ForgetPreview():
                return PREVIEWED
            case Forget():
                return FORGOTTEN
            case proto.MemoryEdit():
                return proto.ToolResponse(call_id="", status="ok", content="memory.md updated")
        raise AssertionError(f"unexpected {request!r}")

    async def loopd(self, request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.SessionOpen):
            return proto.SessionOpened(session=SESSION, created=False)
        assert isinstance(request, proto.Say)
        self.said.append(request.text)
        await conn.send(AssistantText(text="ok"))
        return TurnDone(text="ok")


def files(home: Path) -> dict[Path, bytes]:
    """Every file under `home` (but sockets) and its bytes."""
    return {p: p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


@pytest.fixture
def home(short_dir: Path) -> Path:
    (short_dir / "config").mkdir()
    history_file(short_dir / HISTORY_FILE, f"my locker code is {SECRET}", "hello", "bye")
    (short_dir / "memory").mkdir()
    (short_dir / "memory" / "memory.md").write_text(f"Locker code: {SECRET}\n")
    return short_dir


def after_the_forget(out: str) -> str:
    """What bxctl printed once the forget was done."""
    assert "forgotten, everywhere boxmaker had written it:" in out
    return out[out.index("forgotten, everywhere boxmaker had written it:") :]


# -- bxctl memory forget ----------------------------------------------------------------


async def test_json_prints_the_preview_and_writes_nothing(
    nursery: trio.Nursery, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    before = files(home)
    assert await run("memory", "forget", SECRET, "--json", "--home", str(home)) == 0
    assert files(home) == before
    assert roles.asked == [ForgetPreview(text=SECRET)]
    shown = json.loads(capsys.readouterr().out)
    assert shown["holdings"][-1] == {"store": "chat history", "count": 1, "unit": "lines"}
    assert shown["holdings"][:-1] == [
        {"store": "sessions", "count": 3, "unit": "messages", "names": [SESSION]},
        {"store": "journal", "count": 2, "unit": "lines"},
    ]
    assert shown["entries"] == [{"file": "memory", "entry": f"Locker code: {SECRET}"}]
    assert shown["near"] == ["the zebra code is 7731"]


async def test_yes_forgets_at_once_printing_the_preview_then_what_was_done(
    nursery: trio.Nursery, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    assert await run("memory", "forget", f"  {SECRET.lower()} ", "--yes", "--home", str(home)) == 0
    assert roles.asked == [
        ForgetPreview(text=SECRET.lower()),
        Forget(text=SECRET.lower(), surface=BXCTL),
    ]
    assert loaded(home / HISTORY_FILE) == ["hello", "bye"]
    assert SECRET.encode() not in (home / HISTORY_FILE).read_bytes()
    out = capsys.readouterr().out
    assert "the chat's input history: 1 line" in out.split("forgotten, everywhere")[0]
    done = after_the_forget(out)
    assert not proto.holds(done, SECRET)
    assert "  the chat's input history: 1 line\n" in done
    assert "  session messages: 3 messages\n" in done


async def test_left_out_the_text_is_read_from_stdin_so_no_shell_history_holds_it(
    nursery: trio.Nursery,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{SECRET}\nnot this line\n"))
    assert await run("memory", "forget", "--yes", "--home", str(home)) == 0
    assert roles.asked[-1] == Forget(text=SECRET, surface=BXCTL)
    assert not proto.holds(after_the_forget(capsys.readouterr().out), SECRET)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code"), [("y\n", 0), ("\n", 1), ("n\n", 1)])
async def test_without_yes_it_asks_once_on_a_terminal(
    nursery: trio.Nursery,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    code: int,
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    before = files(home)
    monkeypatch.setattr(sys, "stdin", Tty(answer))
    assert await run("memory", "forget", SECRET, "--home", str(home)) == code
    out = capsys.readouterr().out
    assert out.count("[y/N]") == 1
    assert "a forget cannot be undone" in out
    if code == 0:
        assert roles.asked[-1] == Forget(text=SECRET, surface=BXCTL)
        assert not proto.holds(after_the_forget(out), SECRET)
    else:
        assert roles.asked == [ForgetPreview(text=SECRET)]
        assert files(home) == before
        assert out.endswith("nothing changed\n")


async def test_without_a_terminal_or_yes_nothing_is_forgotten(
    nursery: trio.Nursery, home: Path
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    before = files(home)
    with pytest.raises(CommandError, match="standard input is not a terminal; nothing was"):
        await run("memory", "forget", SECRET, "--home", str(home))
    assert files(home) == before
    assert roles.asked == [ForgetPreview(text=SECRET)]


def test_the_preview_is_rendered_with_hostile_text_escaped(home: Path) -> None:
    hostile = "code \x1b]52;c;ZXZpbA==\x07 \u202eZEBRA"
    history_file(home / HISTORY_FILE, hostile)
    steps = entries.run_command(entries.Forget("zebra"), surface=BXCTL, session=None, where="cli")
    assert next(steps).role == "brokerd"
    previewed = ForgetPreviewed(holdings=[], entries=[ForgetEntry(file="memory", entry=hostile)])
    step = steps.send(previewed)
    assert step.role == "surface"
    with pytest.raises(StopIteration) as done:
        steps.send(OwnFiles(home).answer(step.request))
    confirm = done.value.value
    assert isinstance(confirm, entries.Confirm)
    shown = entries.to_terminal(confirm.question)
    assert not {"\x1b", "\x07", "\u202e"} & set(shown)
    assert "      code \\u{1b}]52;c;ZXZpbA==\\u{7} \\u{202e}ZEBRA\n" in shown
    assert "  the chat's input history: 2 lines\n" in shown


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x", "say what to forget: at least 2 characters"),
        ("  ", "say what to forget: at least 2 characters"),
        ("a\tb", "what to forget cannot hold control characters"),
        ("y" * 1001, "that is 1001 characters; name what to forget in at most 1000"),
    ],
)
async def test_a_text_that_cannot_be_forgotten_is_refused_before_asking(
    nursery: trio.Nursery,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    said: str,
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    assert await run("memory", "forget", text, "--home", str(home)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bxctl: {said}")
    assert err.endswith(f": `bxctl memory forget TEXT --home {home}`\n")
    assert roles.asked == []


def test_help_says_the_difference_from_remove_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    app(["memory", "--help"], result_action="return_value")
    listing = capsys.readouterr().out
    summary = listing[listing.index("│ forget") : listing.index("│ history")]
    assert "for good; memory remove takes one entry out, undoably" in " ".join(
        w for w in summary.split() if w != "│"
    )
    app(["memory", "forget", "--help"], result_action="return_value")
    assert "cannot be undone" in capsys.readouterr().out
    app(["memory", "remove", "--help"], result_action="return_value")
    words = " ".join(capsys.readouterr().out.split())
    assert "memory forget erases a text everywhere, for good" in words


# -- the chat ---------------------------------------------------------------------------


class Typed:
    """The chat's reader with the owner's lines scripted, kept in a real prompt history."""

    def __init__(self, history: PromptHistory, *lines: str) -> None:
        self.history = history
        self.lines = list(lines)
        self.prompts: list[str] = []

    async def read(self, prompt: str, *, history: bool, default: str = "") -> str:
        self.prompts.append(prompt)
        if history:
            self.history.refresh()
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)

    def interrupt(self) -> None:
        pass

    def remember(self, line: str) -> None:
        self.history.keep(line)


async def test_chat_forget_scrubs_the_history_never_keeps_a_command_and_goes_on(
    nursery: trio.Nursery, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    await roles.start(nursery, home)
    history = PromptHistory(home / HISTORY_FILE)
    assert SECRET in (await strings(history))[-1]  # the prompt has it loaded
    typed = Typed(
        history,
        "/remember likes tea",
        f"/forget {SECRET.lower()}",
        "y",
        "/help",
        "still there?",
        "//slash sent",
    )
    with trio.fail_after(20):
        resumed = _Session(home, SESSION)
        await resumed.open()  # `--session`: open before the first line
        await _Conversation(home, resumed, typed, history).run()
    # the forget went to brokerd with the session; the chat went on after it
    assert Forget(text=SECRET.lower(), surface=BXCTL, session=SESSION) in roles.asked
    assert roles.said == ["still there?", "/slash sent"]
    # only the messages for the model are kept; nothing holds the text, on disk or loaded
    assert loaded(home / HISTORY_FILE) == ["hello", "bye", "still there?", "//slash sent"]
    assert await strings(history) == ["//slash sent", "still there?", "bye", "hello"]
    out = capsys.readouterr().out
    assert "the chat's input history: 1 line" in out
    assert not proto.holds(after_the_forget(out), SECRET)


@pytest.mark.parametrize(
    ("before", "after", "forgotten", "by_a_forget"),
    [
        (["a", "Locker: [forgotten]"], ["a"], "fg-abcdefabcdef", True),
        (["a", "Locker: [forgotten]"], ["a", "b"], "fg-abcdefabcdef", False),  # a hand edit
        (["a", "Locker: 7731"], ["a"], "fg-abcdefabcdef", False),
        (["a", "Locker: [forgotten]"], ["a"], msgspec.UNSET, False),
    ],
)
def test_history_tells_a_forgets_own_line_from_a_hand_change(
    before: list[str], after: list[str], forgotten: str | msgspec.UnsetType, by_a_forget: bool
) -> None:
    from bxctl._owner import _by_a_forget

    change = proto.HandChange(
        time="2026-12-06T02:42:52Z",
        file="memory.md",
        before=before,
        after=after,
        forgotten=forgotten,
    )
    assert _by_a_forget(change) is by_a_forget


def test_a_forget_waiting_says_what_it_waits_for_once_a_change(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bxctl._memory import _status

    waiting = proto.ForgetProgress(step="prepare", gone=["memoryd"], waited_s=2, bound_s=60)
    with _status() as show:
        show(waiting)
        show(msgspec.structs.replace(waiting, waited_s=4))  # the same wait: said once
        show(proto.ForgetProgress(step="apply", working=["loopd"], waited_s=6))
    assert capsys.readouterr().err.splitlines() == [
        "waiting for memoryd to come back (not running): 2 s of at most 60 s",
        "loopd still forgetting (6 s)",
    ]
