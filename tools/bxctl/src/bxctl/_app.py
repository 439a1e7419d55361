"""bxctl's commands: one sub-app per noun, docstrings as `--help`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from cyclopts import App, Parameter

from ._common import home_of

__all__ = ["app"]

app = App(
    name="bxctl",
    help="The owner's command line for boxmaker, a personal AI agent on your own machine.\n\n"
    "Start here: `bxctl up` (starts everything, creating a home on first run), then "
    "`bxctl chat` in another terminal. Every command takes --home (default: "
    "$BOXMAKER_HOME, then /var/lib/boxmaker).",
    backend="trio",
    version="0.1.0",
)

Home = Annotated[
    Path | None,
    Parameter(help="the boxmaker home (default: $BOXMAKER_HOME, then /var/lib/boxmaker)"),
]
Json = Annotated[bool, Parameter(name="--json", negative=(), help="print JSON for scripts")]


@app.command
def init(*, home: Home = None, model_url: str | None = None, model: str | None = None) -> int:
    """Create a home: role configs pointing at it, system.md, the starter soul, example grants.

    Safe to run again: nothing that exists is overwritten.

    Args:
        home: the boxmaker home to create.
        model_url: the model server's OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1).
        model: the model name to send to that server.
    """
    from ._init import init_home

    target = home_of(home)
    created = init_home(target, model_url=model_url, model=model)
    if not created:
        print(f"{target} is already a boxmaker home; nothing to do")
    for path in created:
        print(f"created {path}")
    return 0


@app.command
async def up(*, home: Home = None) -> int:
    """Run memoryd, brokerd and loopd in the foreground, with their logs; Ctrl-C stops all.

    Creates the home first if it does not exist yet.
    """
    from ._up import up as run_up

    return await run_up(home_of(home))


@app.command
async def chat(
    *,
    home: Home = None,
    session: str | None = None,
    message: Annotated[str | None, Parameter(alias="-m")] = None,
) -> int:
    """Talk to boxmaker. Tool calls show as they happen; approvals are asked inline.

    On a terminal: line editing and history; Ctrl-C cancels a turn, Ctrl-D leaves.

    Args:
        home: the boxmaker home.
        session: resume this session instead of starting a new one.
        message: send this one message, print the reply, and exit (approvals it raises
            wait for `bxctl approvals`).
    """
    from ._chat import chat as run_chat

    return await run_chat(home_of(home), session, message, home_option=home)


approvals = App(name="approvals", help="Tool calls waiting for your decision.")
app.command(approvals)


@approvals.command(name="list")
async def approvals_list(*, home: Home = None, json: Json = False) -> int:
    """List pending approvals: the tool, the exact arguments, and the session's taint."""
    from ._owner import approvals_list as run

    return await run(home_of(home), as_json=json)


@approvals.command
async def approve(approval: str, /, *, home: Home = None) -> int:
    """Approve one pending call; it runs at once.

    Args:
        approval: the approval's id, as `bxctl approvals list` shows it.
        home: the boxmaker home.
    """
    from ._owner import approvals_decide

    return await approvals_decide(home_of(home), approval, approve=True, reason=None)


@approvals.command
async def deny(approval: str, /, *, home: Home = None, reason: str | None = None) -> int:
    """Deny one pending call; the model is told it was denied (and why, if you say).

    Args:
        approval: the approval's id, as `bxctl approvals list` shows it.
        home: the boxmaker home.
        reason: a sentence the model sees.
    """
    from ._owner import approvals_decide

    return await approvals_decide(home_of(home), approval, approve=False, reason=reason)


@app.command
async def grants(*, home: Home = None, json: Json = False) -> int:
    """The grants brokerd decides with, and any grant file it refused (exit 1 if so).

    Args:
        home: the boxmaker home.
        json: print JSON for scripts.
    """
    from ._owner import grants_list

    return await grants_list(home_of(home), as_json=json)


@app.command
async def reindex(*, home: Home = None, admin_socket: Path | None = None) -> int:
    """Rebuild the recall index from sessions/ and archive.md; recall keeps working meanwhile.

    Args:
        home: the boxmaker home.
        admin_socket: memoryd's owner socket (default {home}/run/owner-memory/admin.sock).
    """
    from ._owner import reindex as run

    return await run(home_of(home), admin_socket)


@app.command
async def recall(
    query: str, /, *, home: Home = None, k: Annotated[int, Parameter(alias="-k")] = 5
) -> int:
    """Search past sessions and archived memory, as the recall tool does.

    Args:
        query: words to look for (operators mean nothing: every word is searched as is).
        home: the boxmaker home.
        k: how many hits at most (1 to 10).
    """
    from ._owner import recall as run

    return await run(home_of(home), query, k)


memory = App(name="memory", help="What boxmaker remembers, and how it changed.")
app.command(memory)


@memory.command
async def show(*, home: Home = None) -> int:
    """The memory block a new session would get now, exactly."""
    from ._owner import memory_show

    return await memory_show(home_of(home))


@memory.command
async def history(
    *, home: Home = None, file: Literal["memory", "user"] | None = None, json: Json = False
) -> int:
    """Every applied memory edit, newest first, as a diff of entries.

    Args:
        home: the boxmaker home.
        file: only edits of memory.md ("memory") or user.md ("user").
        json: print JSON for scripts.
    """
    from ._owner import memory_history

    return await memory_history(home_of(home), file, as_json=json)


@app.command
async def baseline(*, home: Home = None, count: bool = False, json: Json = False) -> int:
    """The system prompt and tool schemas a new session would get, and their size.

    Args:
        home: the boxmaker home.
        count: ask the model server for the exact token count (else an estimate, labelled).
        json: print JSON for scripts.
    """
    from ._baseline import baseline as run

    return await run(home_of(home), count=count, as_json=json)


audit = App(name="audit", help="The hash-chained record of every tool decision.")
app.command(audit)


@audit.command
async def verify(*, home: Home = None) -> int:
    """Check the audit log's hash chain; names the first broken record."""
    from ._owner import audit_verify

    return await audit_verify(home_of(home))


@audit.command
def tail(
    *, home: Home = None, n: Annotated[int, Parameter(alias="-n")] = 20, json: Json = False
) -> int:
    """The last audit records, oldest first.

    Args:
        home: the boxmaker home.
        n: how many records.
        json: print JSON for scripts.
    """
    from ._owner import audit_tail

    return audit_tail(home_of(home), n, as_json=json)


sessions = App(name="sessions", help="The conversations boxmaker has had.")
app.command(sessions)


@sessions.command(name="list")
def sessions_list(*, home: Home = None, json: Json = False) -> int:
    """Every session: id, when it was created, how many records, last activity."""
    from ._sessions import sessions_list as run

    return run(home_of(home), as_json=json)


@sessions.command(name="show")
def sessions_show(session: str, /, *, home: Home = None, json: Json = False) -> int:
    """One session's conversation, with tool calls and the labels of their results.

    Args:
        session: the session id.
        home: the boxmaker home.
        json: print JSON for scripts.
    """
    from ._sessions import sessions_show as run

    return run(home_of(home), session, as_json=json)
