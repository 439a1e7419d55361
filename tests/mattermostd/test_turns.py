"""The turn runner and the reply poster, against a stub loopd and an in-memory Mattermost.

No Mattermost server and no roles: loopd is a handler on a Unix socket in this process,
Mattermost a subclass of the bridge's `Api` that keeps posts in a dict. What is tested is
the bridge's logic: a slow loopd is waited for, a follow rebuilds the reply whole, and an
approval is settled by its call id and no other.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec
import trio

import proto
from mattermostd._api import Api, Post, PostList, Reaction
from mattermostd._approvals import ApprovalPoster
from mattermostd._board import Board
from mattermostd._config import Settings
from mattermostd._ledger import Ledger
from mattermostd._outbound import Outbound
from mattermostd._replies import REPLY_PROP, ReplyPoster
from mattermostd._state import Inflight, OpenApproval, StateStore, session_of
from mattermostd._text import card_text
from mattermostd._turns import TurnRunner
from proto import (
    ApprovalPending,
    AssistantText,
    Label,
    Message,
    PendingApproval,
    Say,
    SessionOpen,
    SessionOpened,
    ToolCall,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnFollow,
)

DM = "d" * 26
ROOT = "r" * 26
SESSION = session_of(ROOT)
BOT = "b" * 26
T = TypeVar("T")


class MemoryApi(Api):
    """Mattermost's posts in a dict: what the bridge's REST calls do, without a server."""

    def __init__(self) -> None:
        super().__init__("http://mattermost.invalid", "token", timeout_s=1.0)
        self.posts: dict[str, Post] = {}
        self._ids = (f"{n:026d}" for n in itertools.count(1))

    async def create_post(
        self,
        *,
        channel_id: str,
        message: str,
        root_id: str,
        pending_post_id: str,
        props: Mapping[str, object] | None = None,
    ) -> Post:
        post = Post(
            id=next(self._ids),
            user_id=BOT,
            channel_id=channel_id,
            root_id=root_id,
            message=message,
            props=dict(props or {}),
        )
        self.posts[post.id] = post
        return post

    async def patch_post(
        self, post_id: str, message: str, *, props: Mapping[str, object] | None = None
    ) -> Post:
        post = msgspec.structs.replace(self.posts[post_id], message=message)
        if props is not None:
            post = msgspec.structs.replace(post, props=dict(props))
        self.posts[post_id] = post
        return post

    async def thread(self, post_id: str) -> PostList:
        found = {p.id: p for p in self.posts.values() if p.root_id == post_id}
        return PostList(order=list(found), posts=found)

    async def reactions(self, post_id: str) -> list[Reaction]:
        return []

    def replies(self) -> list[Post]:
        return [p for p in self.posts.values() if REPLY_PROP in p.props]


Send = Callable[[Message], Awaitable[None]]
Handler = Callable[[Message, Send], Awaitable[Message | None]]
"""A stub loopd: sends frames, then returns the last one, or None to hang up without it
(as a loopd that stops mid-turn does)."""


async def serve_stub(
    path: Path,
    handler: Handler,
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen()

    async def one(stream: trio.SocketStream) -> None:
        async with stream:
            request = await proto.read_frame(stream)

            async def send(frame: Message) -> None:
                await proto.write_frame(stream, frame)

            last = await handler(request, send)
            if last is not None:
                await send(last)

    await trio.serve_listeners(one, [trio.SocketListener(sock)], task_status=task_status)


@dataclass
class World:
    api: MemoryApi
    ledger: Ledger
    board: Board
    runner: TurnRunner
    approvals: ApprovalPoster
    settings: Settings
    opened: list[str] = field(default_factory=list)


def settings(home: Path, loop: Path) -> Settings:
    return Settings(
        home=home,
        url="http://mattermost.invalid",
        token_file=home / "token",
        timeout_s=1.0,
        heartbeat_s=1.0,
        owner_id="o" * 26,
        owner_name="owner",
        channel=None,
        update_s=0.01,
        loop_socket=loop,
        broker_socket=home / "no-brokerd.sock",
        memory_socket=home / "no-memoryd.sock",
        drain_s=1.0,
        call_timeout_s=0.5,
    )


@asynccontextmanager
async def world(short_dir: Path, handler: Handler) -> AsyncIterator[World]:
    s = settings(short_dir, short_dir / "loop.sock")
    api = MemoryApi()
    ledger = Ledger(StateStore(short_dir / "state.json"))
    ledger.load()
    out = Outbound(api)
    out.bot_id = BOT
    board = Board(ledger)

    async def no_reaction(reaction: Reaction) -> None:
        return None

    approvals = ApprovalPoster(s, ledger, board, out, no_reaction)

    async def no_typing(channel: str, root: str) -> None:
        return None

    runner = TurnRunner(s, ledger, approvals, ReplyPoster(out, ledger, s.update_s, no_typing))
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_stub, s.loop_socket, handler)
        runner.attach(nursery, trio.Event())
        yield World(api, ledger, board, runner, approvals, s)
        nursery.cancel_scope.cancel()


def accepted(w: World, text: str = "hello", *, said: bool = False) -> Inflight:
    inflight = Inflight(
        post_id="p" * 26,
        channel_id=DM,
        root_id=ROOT,
        session=SESSION,
        text=text,
        create_at=1,
        said=said,
    )
    w.ledger.accept(inflight)
    w.runner.enqueue(inflight)
    return inflight


async def until(w: World, condition: Callable[[], T | None]) -> T:
    """Wait until `condition` (of what the ledger records) holds: checked at each save."""
    with trio.fail_after(20):
        while not (value := condition()):
            await w.ledger.changed()
        return value


async def handled(w: World, post_id: str = "p" * 26) -> None:
    await until(w, lambda: post_id in w.ledger.state.handled)


CALL = ToolCall(id="call_7", name="memory", arguments='{"action":"add"}')
RESULT = ToolResult(call=CALL, status="ok", content="memory.md updated", label=Label())
PENDING = PendingApproval(
    id="ap-k3f9xy",
    session=SESSION,
    call_id=CALL.id,
    tool="memory",
    arguments=CALL.arguments,
    taint=Label(),
    time="2026-12-01T10:00:00Z",
)


async def test_a_loopd_slow_to_open_the_session_is_waited_for_and_tried_again(
    short_dir: Path,
) -> None:
    opens: list[int] = []

    async def loopd(request: Message, send: Send) -> Message | None:
        match request:
            case SessionOpen():
                opens.append(1)
                if len(opens) == 1:
                    await trio.sleep_forever()  # past the bridge's call_timeout_s
                return SessionOpened(session=SESSION, created=True)
            case Say(text=text):
                return TurnDone(text=f"you said {text}")
        raise AssertionError(request)

    async with world(short_dir, loopd) as w:
        accepted(w)
        await handled(w)
        [reply] = w.api.replies()
        assert reply.message == "you said hello"  # the note about loopd was replaced
        assert len(opens) == 2


async def test_a_follow_rebuilds_the_reply_whole_and_shows_each_tool_once(
    short_dir: Path,
) -> None:
    follows: list[int] = []

    async def loopd(request: Message, send: Send) -> Message | None:
        assert isinstance(request, TurnFollow)
        follows.append(1)
        await send(ToolCalled(call=CALL))
        if len(follows) == 1:
            return None  # loopd restarting: the connection ends mid-turn
        await send(RESULT)
        await send(AssistantText(text="Saved."))
        return TurnDone(text="Saved.")

    async with world(short_dir, loopd) as w:
        accepted(w, said=True)  # said before a restart: it is followed, not said again
        await handled(w)
        [reply] = w.api.replies()
        assert reply.message.count("tool `memory`") == 1, reply.message
        assert reply.message.endswith("Saved."), reply.message
        assert len(follows) == 2


async def test_an_approval_is_settled_by_its_call_and_no_other(short_dir: Path) -> None:
    other = ToolCall(id="call_8", name="recall", arguments='{"query":"tea"}')
    gate = trio.Event()

    async def loopd(request: Message, send: Send) -> Message | None:
        match request:
            case SessionOpen():
                return SessionOpened(session=SESSION, created=True)
            case Say():
                await send(ToolCalled(call=CALL))
                await send(ApprovalPending(approval=PENDING))
                await gate.wait()
                await send(ToolCalled(call=other))
                # a failed call of its own: settled by it, the approval would say so
                await send(ToolResult(call=other, status="error", content="boom", label=Label()))
                await send(RESULT)
                return TurnDone(text="Done.")
        raise AssertionError(request)

    async with world(short_dir, loopd) as w:
        accepted(w)

        def posted() -> OpenApproval | None:
            approval = w.board.get(PENDING.id)
            return approval if approval is not None and approval.post_ids else None

        approval = await until(w, posted)
        assert approval.call_id == CALL.id
        gate.set()
        await handled(w)
        await until(w, lambda: w.board.get(PENDING.id) is None)
        head = w.api.posts[approval.post_ids[0]]
        assert (card_text(head.props) or "").endswith("The call ran.")


async def test_a_post_enqueued_twice_is_answered_by_one_turn(short_dir: Path) -> None:
    # The first connection's catch-up accepts a post made while it connected, and the
    # resume after it enqueues what is in flight: one turn, one reply, still.
    says: list[str] = []

    async def loopd(request: Message, send: Send) -> Message | None:
        match request:
            case SessionOpen():
                return SessionOpened(session=SESSION, created=True)
            case Say(text=text):
                says.append(text)
                return TurnDone(text="once")
        raise AssertionError(request)

    async with world(short_dir, loopd) as w:
        inflight = accepted(w)
        w.runner.enqueue(inflight)
        await handled(w)
        assert says == ["hello"]
        [reply] = w.api.replies()
        assert reply.message == "once"


async def test_an_approval_read_from_a_version_1_file_learns_its_call_when_posted_again(
    short_dir: Path,
) -> None:
    # A bridge before call ids recorded none: brokerd's listing after a restart says it,
    # and from then on the call's result settles the approval.
    async def loopd(request: Message, send: Send) -> Message | None:
        raise AssertionError(request)

    async with world(short_dir, loopd) as w:
        legacy = OpenApproval(
            id=PENDING.id, session=SESSION, channel_id=DM, root_id=ROOT, message="asks"
        )
        w.ledger.approval_opened(legacy)
        assert w.board.of_call(SESSION, CALL.id) is None
        await w.approvals.announce(PENDING, DM, again=True)
        assert w.board.of_call(SESSION, CALL.id) is legacy
        assert legacy.arguments == CALL.arguments
        assert StateStore(short_dir / "state.json").load(now_ms=0) == w.ledger.state
