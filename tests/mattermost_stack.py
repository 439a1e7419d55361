"""boxmaker with its Mattermost bridge, end to end: real roles, a real mattermostd process,
the fake Mattermost server (tests/fakes/mattermost) and the scripted model.

The owner posts through the fake (as the web app would), and the test waits for what the
bridge does: `until` checks what the test can see (the fake's posts, the files the roles
write) again at each change of it, which the fake says itself (a request answered, an
event, a WebSocket) and the kernel says for the files (inotify(7)). Never on a timer.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import tomlkit
import trio
from fakes.mattermost import FakeMattermost, FakeUser, Post, serve_fake_mattermost
from roles import Ended, RunningRole, start_role
from stack import Stack, running_stack

from bxctl._mattermost import mattermost_config
from mattermostd._answers import (
    decision_code,
)
from mattermostd._state import State
from mattermostd._text import (
    card_text,
)

CAP_S = 60.0

_IN_MODIFY = 0x2
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_ISDIR = 0x40000000
_WATCHED = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
_libc = ctypes.CDLL(None, use_errno=True)


class FileChanges:
    """inotify(7) on a directory tree: `changed()` after each file in it is written, renamed,
    made or removed, by whichever process (the roles write the home's files)."""

    def __init__(self, top: Path, changed: Callable[[], object]) -> None:
        self._fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._changed = changed
        self._directories: dict[int, Path] = {}
        self._watch_tree(top)

    def _watch_tree(self, top: Path) -> None:
        for directory, _, _ in os.walk(top):
            wd = _libc.inotify_add_watch(self._fd, os.fsencode(directory), _WATCHED)
            if wd >= 0:  # else it is gone already
                self._directories[wd] = Path(directory)

    async def serve(self) -> None:
        """Read the kernel's events until cancelled; a new directory is watched too."""
        while True:
            await trio.lowlevel.wait_readable(self._fd)
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                continue
            for wd, mask, name in _events(data):
                made = mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO)
                if made and wd in self._directories:
                    # watched before anyone looks again: nothing written in it is missed
                    self._watch_tree(self._directories[wd] / name)
            self._changed()

    def close(self) -> None:
        """Stop watching (after `serve` has ended)."""
        os.close(self._fd)


def _events(data: bytes) -> Iterator[tuple[int, int, str]]:
    offset = 0
    while offset < len(data):
        wd, mask, _, length = _EVENT.unpack_from(data, offset)
        name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
        offset += _EVENT.size + length
        yield wd, mask, os.fsdecode(name)


@dataclass
class MattermostStack:
    """The stack, the fake server, its users and the bridge process."""

    stack: Stack
    mm: FakeMattermost
    owner: FakeUser
    bot: FakeUser
    stranger: FakeUser
    dm: str
    config: Path
    token_file: Path
    bridge: RunningRole | None = None
    ended: list[Ended] = field(default_factory=list)
    changes: trio.lowlevel.ParkingLot = field(default_factory=trio.lowlevel.ParkingLot)
    """Unparked at each change the fake sees and each file written under the home."""

    @property
    def home(self) -> Path:
        return self.stack.home

    @property
    def log_path(self) -> Path:
        return self.home / "mattermostd.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def configure(self, section: str, key: str, value: object) -> None:
        """Set one key of mattermost.toml (before `start`)."""
        doc = tomlkit.parse(self.config.read_text())
        table = doc.setdefault(section, tomlkit.table())
        table[key] = value
        self.config.write_text(tomlkit.dumps(doc))

    async def start(self, *, connected: bool = True) -> None:
        """Start mattermostd; wait until its event stream is open (unless told not to)."""
        self.bridge = await trio.to_thread.run_sync(
            partial(start_role, "mattermostd", self.config, log=self.log_path)
        )
        if connected:
            await self.wait_connected()

    async def wait_connected(self) -> None:
        with trio.fail_after(CAP_S):
            await self.mm.wait_for_websockets(1, self.bot)

    async def stop(self) -> Ended:
        assert self.bridge is not None
        ended = await trio.to_thread.run_sync(self.bridge.stop)
        self.bridge = None
        self.ended.append(ended)
        return ended

    async def kill(self) -> None:
        """SIGKILL the bridge: no drain, no goodbye."""
        assert self.bridge is not None
        await trio.to_thread.run_sync(self.bridge.kill)
        self.bridge = None

    async def exited(self) -> Ended:
        """Wait for the bridge to exit on its own."""
        assert self.bridge is not None
        bridge = self.bridge
        await trio.to_thread.run_sync(partial(bridge.process.wait, timeout=CAP_S))
        self.bridge = None
        ended = bridge.ended()
        self.ended.append(ended)
        return ended

    # -- the owner, through the fake ---------------------------------------------------

    def says(self, text: str, *, root: str = "", user: FakeUser | None = None) -> str:
        """The owner (or `user`) posts in the DM; the post's id."""
        post = self.mm.post(user or self.owner, self.dm, text, root_id=root)
        return str(post["id"])

    def react(self, post_id: str, emoji: str, *, user: FakeUser | None = None) -> None:
        self.mm.react(user or self.owner, post_id, emoji)

    # -- what the bridge did -----------------------------------------------------------

    def state(self) -> State:
        path = self.home / "mattermost" / "state.json"
        return msgspec.json.decode(path.read_bytes(), type=State) if path.exists() else State()

    def bot_posts(self, *, root: str | None = None) -> list[Post]:
        return [
            p
            for p in self.mm.live_posts(self.dm)
            if p.user_id == self.bot.id and (root is None or p.root_id == root)
        ]

    def replies_to(self, post_id: str) -> list[Post]:
        """The bridge's reply post(s) to one owner post."""
        return [
            p
            for p in self.bot_posts()
            if str((p.props or {}).get("boxmaker_reply_to", "")).split("#")[0] == post_id
        ]

    def card(self, post: Post | str) -> str:
        """The text of an approval post's card, as it is now."""
        post_id = post if isinstance(post, str) else post.id
        return card_text(self.mm.store.posts[post_id].props) or ""

    def code(self, approval: Post) -> str:
        """The code a reply names to decide the approval of this post."""
        return decision_code(str(approval.props["boxmaker_approval"]))

    def approval_posts(self, root: str) -> list[Post]:
        return [p for p in self.bot_posts(root=root) if (p.props or {}).get("boxmaker_approval")]

    async def until(self, condition: Callable[[], Any], what: str) -> Any:
        """Wait until `condition` is truthy (its value), or fail naming `what`.

        `condition` reads what the fake saw or a file a role wrote; it is checked now and
        again at each change of either (`changes`), never on a timer.
        """
        with trio.move_on_after(CAP_S):
            while not (value := condition()):
                await self.changes.park()
            return value
        raise AssertionError(f"timed out waiting for {what}\n--- bridge log ---\n{self.log()}")

    async def answered(self, post_id: str) -> Post:
        """Wait until the bridge has handled `post_id` (its reply is final); the reply."""
        await self.until(lambda: post_id in self.state().handled, f"the answer to {post_id}")
        [reply] = [
            p for p in self.replies_to(post_id) if "#" not in str(p.props.get("boxmaker_reply_to"))
        ]
        return reply

    async def approval(self, root: str, count: int = 1) -> Post:
        """Wait for the `count`th approval post in a thread; that post."""
        posts = await self.until(
            lambda: len(self.approval_posts(root)) >= count and self.approval_posts(root),
            f"approval post {count} in thread {root}",
        )
        return posts[count - 1]  # type: ignore[no-any-return]

    def session_dir(self, root: str) -> Path:
        return self.home / "sessions" / f"mm-{root}"


def exactly_once(world: MattermostStack, *said: str) -> None:
    """Each post in `said` has exactly one reply; none was created twice."""
    for post in said:
        replies = [
            p for p in world.replies_to(post) if "#" not in str(p.props.get("boxmaker_reply_to"))
        ]
        assert len(replies) == 1, (post, [r.message for r in replies])
        assert post in world.state().handled
    texts = [
        p.props.get("boxmaker_reply_to")
        for p in world.bot_posts()
        if p.props.get("boxmaker_reply_to")
    ]
    assert len(texts) == len(set(texts)), texts


def _write_token(path: Path, token: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")


@asynccontextmanager
async def mattermost_stack(
    directory: Path, *, start: bool = True, **settings: tuple[str, object]
) -> AsyncIterator[MattermostStack]:
    """The stack, a fake Mattermost with owner, bot and stranger, and mattermostd.

    `settings` are mattermost.toml keys: `heartbeat_s=("server", 1.0)`.
    """
    async with serve_fake_mattermost() as mm:
        owner = mm.create_user("owner")
        bot = mm.create_user("boxmaker", bot=True)
        stranger = mm.create_user("stranger")
        dm = mm.direct_channel(owner, bot)
        with running_stack(directory) as stack:
            token_file = stack.home / "mattermost.token"
            _write_token(token_file, bot.token)
            # bxctl init's own code writes the config (a blocking HTTP client: a thread)
            config = await trio.to_thread.run_sync(
                partial(
                    mattermost_config, stack.home, url=mm.url, token_file=token_file, owner="owner"
                )
            )
            assert config is not None
            world = MattermostStack(stack, mm, owner, bot, stranger, dm, config, token_file)
            mm.watch(world.changes.unpark_all)
            files = FileChanges(stack.home, world.changes.unpark_all)
            try:
                async with trio.open_nursery() as watching:
                    watching.start_soon(files.serve)
                    for key, (section, value) in settings.items():
                        world.configure(section, key, value)
                    try:
                        if start:
                            await world.start()
                        yield world
                    finally:
                        if world.bridge is not None:
                            await world.stop()
                        watching.cancel_scope.cancel()
            finally:
                files.close()
