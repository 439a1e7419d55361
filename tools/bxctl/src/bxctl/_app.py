"""bxctl's commands: one sub-app per noun, docstrings as `--help`.

Only cyclopts is imported here; each command imports what it uses when it runs, so that
the one-request commands start fast (`just bench cli`). The one-request commands are
plain functions on the blocking client (no trio); `up` and `chat` run under trio. The
most used of them are `_quick`'s functions, which `bxctl` also calls without cyclopts
when their arguments are plain (`_quick.route`): their bodies pass every argument on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from cyclopts import App, Parameter

from ._quick import RECALL_K, SESSIONS_LIMIT

__all__ = ["app"]

HOME_HELP = (
    "the boxmaker home (default: $BOXMAKER_HOME, then ~/.boxmaker); before or after the command"
)

app = App(
    name="bxctl",
    help="The owner's command line for boxmaker, a personal AI agent on your own machine.\n\n"
    "Start here: `bxctl up` runs everything (it makes a home in ~/.boxmaker the first "
    "time), then `bxctl chat` in another terminal talks to it. --home (or $BOXMAKER_HOME) "
    "names another home, before or after the command.",
    backend="trio",
    version="0.1.0",
    help_format="markdown",
)

Home = Annotated[Path | None, Parameter(help=HOME_HELP)]
Json = Annotated[bool, Parameter(name="--json", negative=(), help="print JSON for scripts")]


def _home(home: Path | None, *, must_exist: bool = True) -> Path:
    from ._common import home_of

    return home_of(home, must_exist=must_exist)


# -- running it ----------------------------------------------------------------------------


@app.command(sort_key=1)
async def up(*, home: Home = None) -> int:
    """Run memoryd, brokerd and loopd in the foreground, with their logs; Ctrl-C stops all.

    Makes the home first if there is none yet. A role that dies is started again.

    Example: bxctl up
    """
    from ._up import up as run_up

    return await run_up(_home(home, must_exist=False))


@app.command(sort_key=2)
async def chat(
    *,
    home: Home = None,
    session: str | None = None,
    message: Annotated[str | None, Parameter(alias="-m")] = None,
) -> int:
    """Talk to boxmaker. Tool calls show as they happen; approvals are asked inline.

    On a terminal: line editing and history (of your messages; never of a command line);
    Ctrl-C cancels a turn, Ctrl-D leaves. A line starting with / and a word is one of the
    chat's own commands (/remember, /remove, /forget, /why, /undo, /memory; /help lists
    them), never sent to the model. At an approval, e edits the proposed memory text
    before approving it.

    Example: bxctl chat --session chat-k6m5

    Args:
        home: the boxmaker home.
        session: go on with this session (its id, or the start of it, as `bxctl sessions
            list` shows it) instead of starting a new one.
        message: send this one message, print the reply, and exit (approvals it raises
            wait for `bxctl approvals`).
    """
    from ._chat import chat as run_chat
    from ._common import given_home
    from ._sessions import resolve_session

    where = _home(home)
    resumed = None if session is None else resolve_session(where, session)
    return await run_chat(where, resumed, message, home_option=given_home())


@app.command(sort_key=3)
def init(
    *,
    home: Home = None,
    model_url: str | None = None,
    model: str | None = None,
    mattermost_url: str | None = None,
    token_file: Path | None = None,
    owner: str | None = None,
    mattermost_channel: str | None = None,
) -> int:
    """Make a home: role configs pointing at it, system.md, the starter soul, example grants.

    Safe to run again: nothing that exists is overwritten (change settings with `bxctl
    config set`). With --mattermost-url, --token-file and --owner it also connects
    boxmaker to your Mattermost (docs/mattermost.md): `bxctl up` then runs the bridge.

    Example: bxctl init --model-url http://127.0.0.1:8080/v1 --model qwen3

    Example: bxctl init --mattermost-url https://chat.example.org --token-file
    ~/.boxmaker/mattermost.token --owner alice

    Args:
        home: the boxmaker home to make.
        model_url: the model server's OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1).
        model: the model name to send to that server.
        mattermost_url: your Mattermost server's address (https://…).
        token_file: a file holding the bot account's access token, mode 0600.
        owner: your Mattermost username: the one user the bot listens to.
        mattermost_channel: a channel id whose posts by you it answers too (besides your
            direct channel with the bot).
    """
    from ._common import bxctl
    from ._init import init_home

    given = [mattermost_url, token_file, owner]
    if any(v is not None for v in given) and any(v is None for v in given):
        from ._common import CommandError

        raise CommandError("Mattermost needs all three: --mattermost-url, --token-file and --owner")
    target = _home(home, must_exist=False)
    existed = (target / "config").is_dir()
    created = init_home(target, model_url=model_url, model=model)
    for path in created:
        print(f"created {path}")
    if mattermost_url is not None and token_file is not None and owner is not None:
        from ._mattermost import mattermost_config

        written = mattermost_config(
            target,
            url=mattermost_url,
            token_file=token_file,
            owner=owner,
            channel=mattermost_channel,
        )
        if written is None:
            print(
                f"{target / 'config' / 'mattermost.toml'} exists already; nothing changed "
                f"(edit it, or remove it and run this again)"
            )
        else:
            print(f"created {written}; `{bxctl('up')}` runs the bridge")
            created.append(written)
    if existed and (model_url is not None or model is not None):
        settings = [f"model.url {model_url}"] if model_url is not None else []
        settings += [f"model.model {model}"] if model is not None else []
        commands = " and ".join(f"`{bxctl('config set ' + s)}`" for s in settings)
        print(f"{target} is already a home: its model did not change. To change it: {commands}")
    elif not created:
        print(f"{target} is already a boxmaker home; nothing to do")
    return 0


# -- the owner's nouns ------------------------------------------------------------------

approvals = App(name="approvals", help="Tool calls waiting for your decision.", sort_key=10)
app.command(approvals)


@approvals.command(name="list")
def approvals_list(*, home: Home = None, json: Json = False) -> int:
    """List pending approvals: the tool, the exact arguments, and the session's taint.

    Example: bxctl approvals list
    """
    from . import _quick

    return _quick.approvals_list(home=home, json=json)


@approvals.command
def approve(approval: str, /, *, home: Home = None, text: str | None = None) -> int:
    """Approve one pending call; it runs at once. --text approves your own wording instead.

    Example: bxctl approvals approve ap-k2m9qx

    Example: bxctl approvals approve ap-k2m9qx --text "Prefers answers in UTC"

    Args:
        approval: the approval's id, as `bxctl approvals list` shows it.
        home: the boxmaker home.
        text: for a memory add or replace: the entry's text as you want it (edit before
            approve); the model is told what ran.
    """
    from ._owner import approvals_decide, approve_with_text

    if text is not None:
        return approve_with_text(_home(home), approval, text)
    return approvals_decide(_home(home), approval, approve=True, reason=None)


@approvals.command
def deny(approval: str, /, *, home: Home = None, reason: str | None = None) -> int:
    """Deny one pending call; the model is told it was denied (and why, if you say).

    Example: bxctl approvals deny ap-k2m9qx --reason "not that file"

    Args:
        approval: the approval's id, as `bxctl approvals list` shows it.
        home: the boxmaker home.
        reason: a sentence the model sees.
    """
    from ._owner import approvals_decide

    return approvals_decide(_home(home), approval, approve=False, reason=reason)


memory = App(name="memory", help="What boxmaker remembers, and how it changed.", sort_key=11)
app.command(memory)


@memory.command
def show(*, home: Home = None) -> int:
    """The memory block a new session would get now, exactly.

    Example: bxctl memory show
    """
    from . import _quick

    return _quick.memory_show(home=home)


MemoryFileOption = Annotated[
    Literal["memory", "user"] | None,
    Parameter(help='"memory" (memory.md) or "user" (user.md, what it knows about you)'),
]
Yes = Annotated[
    bool, Parameter(name="--yes", negative=(), help="change it without asking y/N (scripts)")
]


@memory.command
def add(text: str, /, *, file: Literal["memory", "user"] = "memory", home: Home = None) -> int:
    """Add an entry yourself: it is in the memory block of every new session.

    Example: bxctl memory add "I prefer answers in UTC" --file user

    Args:
        text: the entry, as it should read.
        file: "memory" (memory.md, the default) or "user" (user.md).
        home: the boxmaker home.
    """
    from entries import Remember

    from ._common import CommandError, bxctl
    from ._memory import run_owner_command, terminal_confirm

    if not text.strip():
        example = bxctl("memory add 'I prefer answers in UTC'")
        raise CommandError(f"say what to remember: `{example}`")
    confirm = terminal_confirm(f"`{bxctl('memory add')}`")
    return run_owner_command(_home(home), Remember(text, file), confirm=confirm)


@memory.command
def replace(
    old: str, new: str, /, *, file: MemoryFileOption = None, yes: Yes = False, home: Home = None
) -> int:
    """Replace the entry holding OLD (any part of it) with NEW, after showing it and asking.

    Example: bxctl memory replace "answers in UTC" "I prefer answers in CET"

    Args:
        old: any part of exactly one entry (`bxctl memory why` lists the entries holding it).
        new: the entry's new text.
        file: only look in "memory" (memory.md) or "user" (user.md); default both.
        yes: change it without asking y/N (for scripts).
        home: the boxmaker home.
    """
    from entries import Replace

    from ._common import CommandError, bxctl
    from ._memory import run_owner_command, terminal_confirm

    if not new.strip():
        raise CommandError("the new text is empty; to remove the entry, use `memory remove`")
    command = Replace(_part(old), new, file, confirmed=yes)
    confirm = terminal_confirm(f"`{bxctl('memory replace')}`")
    return run_owner_command(_home(home), command, confirm=confirm)


@memory.command
def remove(
    old: str, /, *, file: MemoryFileOption = None, yes: Yes = False, home: Home = None
) -> int:
    """Remove the entry holding OLD (any part of it), after showing it and asking.

    It can be undone (`bxctl memory undo`), like every edit, and the entry's text stays
    in the edit history; `bxctl memory forget` erases a text everywhere, for good.

    Example: bxctl memory remove "answers in UTC"

    Args:
        old: any part of exactly one entry (`bxctl memory why` lists the entries holding it).
        file: only look in "memory" (memory.md) or "user" (user.md); default both.
        yes: remove it without asking y/N (for scripts).
        home: the boxmaker home.
    """
    from entries import Remove

    from ._common import bxctl
    from ._memory import run_owner_command, terminal_confirm

    confirm = terminal_confirm(f"`{bxctl('memory remove')}`")
    return run_owner_command(_home(home), Remove(_part(old), file, yes), confirm=confirm)


ForgetYes = Annotated[
    bool,
    Parameter(
        name="--yes", negative=(), help="forget at once, printing the preview and what was done"
    ),
]
ForgetJson = Annotated[
    bool, Parameter(name="--json", negative=(), help="print the preview as JSON; change nothing")
]


@memory.command
def forget(
    text: str | None = None,
    /,
    *,
    yes: ForgetYes = False,
    json: ForgetJson = False,
    home: Home = None,
) -> int:
    """Erase TEXT from every file, for good; `memory remove` takes one entry out, undoably.

    First a preview, store by store, of what holds TEXT (in any case): the entries of
    memory.md, user.md and archive.md that go whole, then the journal, session logs,
    audit log, recall index and chat history, where each copy becomes [forgotten]. Then
    y/N, once. A forget cannot be undone: to have it back, tell it again.

    Example: bxctl memory forget "ZEBRA-7731"
    Example: bxctl memory forget      (asks for it, not echoed: your shell's history
    never holds it; piped, the first line of stdin)

    Args:
        text: the text to forget, matched in any case (2 to 1,000 characters); left out,
            it is asked for (or read from stdin's first line), out of the shell's history.
        yes: forget at once, printing the preview and what was done (for scripts).
        json: print the preview as JSON and change nothing.
        home: the boxmaker home.
    """
    import sys

    import proto
    from entries import Forget

    from ._common import bxctl, inline, print_json
    from ._memory import forget_preview, run_owner_command, terminal_confirm

    where = _home(home)  # first: the usage line below names the home given
    if text is None:
        text = _secret_text()
    problem = proto.forget_problem(text)
    if problem is not None:
        # a usage error (exit 2), said before anything is asked
        print(f"bxctl: {inline(problem)}: `{bxctl('memory forget TEXT')}`", file=sys.stderr)
        return 2
    if json:
        print_json(forget_preview(where, text.strip()))
        return 0
    confirm = terminal_confirm(f"`{bxctl('memory forget')}`")
    return run_owner_command(where, Forget(text.strip(), yes), confirm=confirm)


def _secret_text() -> str:
    """The text to forget, from a prompt that does not echo it, or stdin's first line."""
    import getpass
    import sys

    if sys.stdin.isatty():
        return getpass.getpass("text to forget (not shown): ")
    return sys.stdin.readline().rstrip("\r\n")


@memory.command
def why(part: str, /, *, home: Home = None, json: Json = False) -> int:
    """Where each entry holding PART came from: its edits, who approved them where, and why.

    For each edit: its id, time, session and call, the decision and where it was made, the
    session's label then, what you had said before the call, and the entry's earlier text.

    Example: bxctl memory why UTC

    Args:
        part: any part of an entry's text (memory.md, user.md or archive.md).
        home: the boxmaker home.
        json: print JSON for scripts.
    """
    from entries import Why

    from ._common import bxctl, print_json
    from ._memory import memory_why_json, run_owner_command, terminal_confirm

    where = _home(home)
    if json:
        print_json(memory_why_json(where, _part(part)))
        return 0
    confirm = terminal_confirm(f"`{bxctl('memory why')}`")
    return run_owner_command(where, Why(_part(part)), confirm=confirm)


@memory.command
def undo(edit: str | None = None, /, *, yes: Yes = False, home: Home = None) -> int:
    """Undo one memory edit (the last one by default): shows the edit and its undo, asks y/N.

    The undo is your own edit; if the file changed since, it is refused and nothing changes.

    Example: bxctl memory undo ed-k3f9xy

    Args:
        edit: the edit's id, as `bxctl memory history` shows it (default: the last edit).
        yes: undo it without asking y/N (for scripts).
        home: the boxmaker home.
    """
    import proto
    from entries import Undo

    from ._common import CommandError, bxctl, clipped
    from ._memory import run_owner_command, terminal_confirm

    if edit is not None and proto.EDIT_ID.fullmatch(edit.strip()) is None:
        raise CommandError(
            f"{clipped(edit)!r} is not an edit id (ed- and six characters); "
            f"`{bxctl('memory history')}` shows each edit's id"
        )
    command = Undo(None if edit is None else edit.strip(), confirmed=yes)
    confirm = terminal_confirm(f"`{bxctl('memory undo')}`")
    return run_owner_command(_home(home), command, confirm=confirm)


def _part(part: str) -> str:
    """Any part of an entry, as the owner names one, checked as every surface checks it."""
    from entries import part_problem

    from ._common import CommandError

    problem = part_problem(part)
    if problem is not None:
        raise CommandError(problem)
    return part.strip()


@memory.command
def history(
    *,
    home: Home = None,
    file: Literal["memory", "user"] | None = None,
    limit: int | None = None,
    every: Annotated[bool, Parameter(name="--all", negative="")] = False,
    json: Json = False,
) -> int:
    """The newest memory edits first, each with its id, as a diff of entries.

    Example: bxctl memory history --file user --limit 50

    Args:
        home: the boxmaker home.
        file: only edits of memory.md ("memory") or user.md ("user").
        limit: how many of the newest edits to show (default 20; with --json, every one).
        every: show every edit, however old.
        json: print JSON for scripts.
    """
    from ._owner import HISTORY_LIMIT, memory_history

    if every:
        limit = None
    elif limit is None and not json:
        limit = HISTORY_LIMIT
    return memory_history(_home(home), file, as_json=json, limit=limit)


@app.command(sort_key=12)
def recall(
    *words: str,
    home: Home = None,
    k: Annotated[int, Parameter(alias="-k")] = RECALL_K,
    json: Json = False,
) -> int:
    """Search past sessions and archived memory, as the recall tool does.

    Each hit shows where it is, who said it and its label, the snippet the recall tool
    shows, and the command that opens it: `bxctl sessions show ID --at RECORD` for a
    session's record, `bxctl memory why PART` for an archived entry.

    Example: bxctl recall Heron launch -k 3

    Example: bxctl recall Heron launch --json

    Args:
        words: what to look for; several words are one search (operators mean nothing:
            every word is searched as it is).
        home: the boxmaker home.
        k: how many hits at most, 1 to 10.
        json: print JSON for scripts: each hit's source, label, snippet and open command.
    """
    from . import _quick

    return _quick.recall(*words, home=home, k=k, json=json)


sessions = App(name="sessions", help="The conversations boxmaker has had.", sort_key=13)
app.command(sessions)


@sessions.command(name="list")
def sessions_list(
    *, home: Home = None, json: Json = False, limit: int = SESSIONS_LIMIT, before: str | None = None
) -> int:
    """The sessions, newest first: id, when it was created, how many records, last activity.

    Example: bxctl sessions list

    Example: bxctl sessions list --before chat-k6m5 --limit 20

    Args:
        home: the boxmaker home.
        json: print JSON for scripts.
        limit: how many sessions to show at once.
        before: show the sessions older than this one (its id, or the start of it), as
            the line after a full page says.
    """
    from . import _quick

    return _quick.sessions_list(home=home, json=json, limit=limit, before=before)


@sessions.command(name="show")
def sessions_show(
    session: str,
    /,
    *,
    home: Home = None,
    json: Json = False,
    baseline: bool = False,
    at: str | None = None,
    around: int | None = None,
) -> int:
    """One session's conversation, with tool calls and the labels of their results.

    With --at, only the records around one, that one marked `>`: the command
    `bxctl recall` prints beside each hit opens it so.

    Example: bxctl sessions show chat-k6m5

    Example: bxctl sessions show chat-k6m5ert76psohrmw5uwb2ibpb4 --at 12 --around 5

    Example: bxctl sessions show chat-k6m5 --baseline

    Args:
        session: the session's id, or the start of it.
        home: the boxmaker home.
        json: print JSON for scripts.
        baseline: print instead the exact memory block the session started with (what
            it knew of memory.md and user.md, whatever they say now).
        at: show the record numbered so (from 0, as `bxctl recall` prints it; EPOCH:RECORD
            in a later epoch) and the records around it.
        around: with --at, how many records before and after it (default 3).
    """
    from ._common import CommandError
    from ._sessions import AROUND, resolve_session, session_block, session_window
    from ._sessions import sessions_show as run

    if at is None and around is not None:
        raise CommandError("--around says how many records around --at to show; give --at too")
    if baseline and at is not None:
        raise CommandError("--baseline shows the memory block, not records; drop --at")
    where = _home(home)
    resolved = resolve_session(where, session)
    if baseline:
        return session_block(where, resolved)
    if at is not None:
        return session_window(where, resolved, at, AROUND if around is None else around, json)
    return run(where, resolved, as_json=json)


config = App(
    name="config",
    help=(
        "The home's settings: each role's TOML file (mattermost.toml too), read and changed "
        "with its comments kept."
    ),
    sort_key=14,
)
app.command(config)


@config.command(name="show")
def config_show(*, home: Home = None) -> int:
    """Every setting of every role's file, with its value now (defaults included).

    Example: bxctl config show
    """
    from ._config import show as run

    return run(_home(home))


@config.command(name="get")
def config_get(key: str, /, *, home: Home = None) -> int:
    """One setting's value.

    Example: bxctl config get model.url

    Args:
        key: `section.key` (`model.url`, `server.heartbeat_s`), or `FILE.section.key`
            where several files have it (`loopd.sockets.drain_s`); FILE is memoryd,
            brokerd, loopd or mattermost, a file in the home's config/ folder.
        home: the boxmaker home.
    """
    from ._config import get as run

    return run(_home(home), key)


@config.command(name="set")
def config_set(key: str, value: str, /, *, home: Home = None) -> int:
    """Change one setting, checked as the role will read it; says which role to restart.

    Example: bxctl config set model.url http://127.0.0.1:8080/v1

    Example: bxctl config set mattermost.server.heartbeat_s 60

    Args:
        key: `section.key` (`model.url`, `server.heartbeat_s`), or `FILE.section.key`
            where several files have it (`loopd.sockets.drain_s`); FILE is memoryd,
            brokerd, loopd or mattermost, a file in the home's config/ folder.
        value: the new value, as TOML (`8192`, `true`, `"text"`); a bare word is text.
        home: the boxmaker home.
    """
    from ._config import set_value as run

    return run(_home(home), key, value)


@app.command(sort_key=15)
def grants(*, home: Home = None, json: Json = False) -> int:
    """The grants brokerd decides with, and any grant file it refused (exit 1 if so).

    Example: bxctl grants

    Args:
        home: the boxmaker home.
        json: print JSON for scripts.
    """
    from ._owner import grants_list

    return grants_list(_home(home), as_json=json)


audit = App(name="audit", help="The signed record of every tool decision.", sort_key=16)
app.command(audit)


@audit.command
def verify(*, home: Home = None) -> int:
    """Check the audit log's signatures and chain; names the first broken record.

    Example: bxctl audit verify
    """
    from ._owner import audit_verify

    return audit_verify(_home(home))


@audit.command
def tail(
    *, home: Home = None, n: Annotated[int, Parameter(alias="-n")] = 20, json: Json = False
) -> int:
    """The last audit records, oldest first.

    Example: bxctl audit tail -n 5

    Args:
        home: the boxmaker home.
        n: how many records.
        json: print JSON for scripts.
    """
    from ._owner import audit_tail

    return audit_tail(_home(home), n, as_json=json)


@app.command(sort_key=17)
def reindex(*, home: Home = None, admin_socket: Path | None = None) -> int:
    """Rebuild the recall index from sessions/ and archive.md; recall keeps working meanwhile.

    Example: bxctl reindex

    Args:
        home: the boxmaker home.
        admin_socket: memoryd's owner socket (default {home}/run/owner-memory/admin.sock).
    """
    from ._owner import reindex as run

    return run(_home(home), admin_socket)


@app.command(sort_key=18)
async def baseline(*, home: Home = None, count: bool = False, json: Json = False) -> int:
    """The system prompt and tool schemas a new session would get, and their size.

    Example: bxctl baseline --count

    Args:
        home: the boxmaker home.
        count: ask the model server for the exact token count (else an estimate, labelled).
        json: print JSON for scripts.
    """
    from ._baseline import baseline as run

    return await run(_home(home), count=count, as_json=json)


@app.command(sort_key=19)
def backup(dest: Path, /, *, home: Home = None) -> int:
    """Copy the home to DEST while the roles run: restore with docs/your-data.md#restore.

    The copy holds the home's keys and secrets: keep it like the home (mode 0700).

    Example: bxctl backup /mnt/usb/boxmaker-2026-12-05

    Args:
        dest: a new folder to copy into (not inside the home); made 0700.
        home: the boxmaker home.
    """
    from ._backup import backup as run

    return run(_home(home), dest)
