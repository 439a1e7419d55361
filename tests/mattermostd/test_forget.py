"""`!forget` in Mattermost: the bridge's own part (its state file and the damaged copies
beside it), the preview as a card decided like the others, and after the forget the
bridge's own posts edited and the owner's listed with links.

The bridge runs in the test's loop against the fake Mattermost; brokerd is a double on
its owner socket that answers the preview and the forget as the roles would (their part
is tested with the roles). Nothing but the owner's own post is ever read as a command.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from fakes.mattermost import FakeMattermost, Post
from fakes.world import World, open_world
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

import entries
import proto
from mattermostd._api import Post as ApiPost
from mattermostd._board import Board
from mattermostd._bridge import Bridge
from mattermostd._config import Settings
from mattermostd._forget import permalink, scrub_state, state_holds
from mattermostd._inbox import Command, Ignored, Inbox, Stranger
from mattermostd._ledger import Ledger
from mattermostd._state import (
    DecidedInMattermost,
    Inflight,
    OpenApproval,
    OpenConfirmation,
    State,
    StateStore,
    Undecided,
    session_of,
)

SECRET = "ZEBRA-7731"
CAP_S = 20.0
OWNER = "o" * 26
BOT = "b" * 26
DM = "d" * 26
ROOT = "r" * 26


def holds_no_copy(raw: bytes | str, text: str = SECRET) -> bool:
    """Neither the text nor any case of it is in `raw` (decoded as UTF-8, lowered)."""
    decoded = raw.decode() if isinstance(raw, bytes) else raw
    return text.lower() not in decoded.lower()


# -- the state file ------------------------------------------------------------------------


def holding_state() -> State:
    """A state with the secret in every field that can hold what someone said."""
    escaped = json.dumps({"action": "add", "file": "memory", "text": f"code {SECRET.lower()}"})
    return State(
        horizon=1,
        channels={DM: 5},
        inflight=[
            Inflight(
                post_id="p" * 26,
                channel_id=DM,
                root_id=ROOT,
                session=session_of(ROOT),
                text=f"my locker code is {SECRET}",
                create_at=3,
            ),
            Inflight(
                post_id="q" * 26,
                channel_id=DM,
                root_id=ROOT,
                session=session_of(ROOT),
                text="nothing to see",
                create_at=4,
            ),
        ],
        approvals={
            "ap-waiting": OpenApproval(
                id="ap-waiting",
                session=session_of(ROOT),
                channel_id=DM,
                root_id=ROOT,
                message=f"boxmaker asks to remember `{SECRET}`",
                arguments=escaped.replace("7731", "\\u0037731"),  # an escaped copy
                call_id="call_1",
                status=Undecided(revised=json.dumps({"text": f"Code: {SECRET}!"})),
            ),
            "ap-decided": OpenApproval(
                id="ap-decided",
                session=session_of(ROOT),
                channel_id=DM,
                root_id=ROOT,
                message="boxmaker asks",
                status=DecidedInMattermost(text=f"**Approved** ({SECRET.swapcase()})"),
            ),
        },
        confirmations={
            "cf-remove": OpenConfirmation(
                id="cf-remove",
                channel_id=DM,
                root_id=ROOT,
                proposal=entries.Proposal(
                    edit=proto.MemoryRemove(file="memory", old=f"Locker: {SECRET}")
                ),
            ),
            "cf-other": OpenConfirmation(
                id="cf-other",
                channel_id=DM,
                root_id=ROOT,
                proposal=entries.Proposal(edit=proto.MemoryRemove(file="memory", old="Tea.")),
            ),
        },
    )


def test_the_bridges_part_scrubs_its_state_and_damaged_copies_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "state.json")
    store.save(holding_state())
    json_copy = tmp_path / "state.json.damaged-100"
    json_copy.write_bytes(msgspec.json.encode({"version": 9, "inflight": [{"text": SECRET}]}))
    torn_copy = tmp_path / "state.json.damaged-200"  # cut short, the text escaped in it
    torn_copy.write_bytes(b'{"version": 2, "inflight": [{"text": "code ZEBRA\\u002d7731')
    clean_copy = tmp_path / "state.json.damaged-300"
    clean_copy.write_bytes(b'{"version": 2, "horizon": 1')
    ledger = Ledger(store)
    ledger.load()

    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    looked = ledger.holding(SECRET.lower())
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # a look writes nothing
    assert looked == [
        proto.Holding(
            store="mattermost",
            count=6,  # an in-flight post, two approvals, a change shown; two damaged copies
            unit="records",
            names=["state.json", "state.json.damaged-100", "state.json.damaged-200"],
        )
    ]

    assert ledger.forget(SECRET.lower()) == looked
    assert holds_no_copy(store.path.read_bytes())
    assert holds_no_copy(json_copy.read_bytes())  # redacted, kept
    assert json.loads(json_copy.read_bytes()) == {
        "version": 9,
        "inflight": [{"text": "[forgotten]"}],
    }
    assert not torn_copy.exists()  # undecodable: deleted, its escapes cannot be trusted
    assert clean_copy.read_bytes() == before[clean_copy.name]
    state = StateStore(store.path).load(now_ms=1)  # what a restarted bridge reads
    assert [i.text for i in state.inflight] == ["my locker code is [forgotten]", "nothing to see"]
    waiting = state.approvals["ap-waiting"]
    assert waiting.message == "boxmaker asks to remember `[forgotten]`"
    assert waiting.arguments is not UNSET
    assert json.loads(waiting.arguments)["text"] == "code [forgotten]"  # still JSON
    assert isinstance(waiting.status, Undecided)
    assert isinstance(waiting.status.revised, str)
    assert json.loads(waiting.status.revised) == {"text": "Code: [forgotten]!"}
    assert state.approvals["ap-decided"].status == DecidedInMattermost(
        text="**Approved** ([forgotten])"
    )
    assert list(state.confirmations) == ["cf-other"]  # a change holding it is dropped
    assert ledger.forget(SECRET) == []  # nothing left the second time


def test_ids_stay_ids_whatever_the_text(tmp_path: Path) -> None:
    ledger = Ledger(StateStore(tmp_path / "state.json"))
    ledger.load()
    ledger.state = holding_state()
    ledger.forget("rrr")  # a piece of every thread's root id
    assert all(i.root_id == ROOT for i in ledger.state.inflight)
    assert set(ledger.state.approvals) == {"ap-waiting", "ap-decided"}


TEXTS = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=2, max_size=12).filter(
    lambda t: proto.forget_problem(t) is None
)


@given(needle=TEXTS, said=st.text(max_size=20))
def test_after_a_scrub_no_record_holds_the_text_and_the_state_still_reads(
    needle: str, said: str
) -> None:
    state = holding_state()
    state.inflight[1].text = f"{said}{needle}{said}"
    state.approvals["ap-decided"].message = needle.upper()
    scrub_state(state, needle)
    assert state_holds(state, needle) == 0
    assert msgspec.json.decode(msgspec.json.encode(state), type=State) == state


# -- who may forget ------------------------------------------------------------------------


def api_post(**fields: Any) -> ApiPost:
    values: dict[str, Any] = {
        "id": "p" * 26,
        "create_at": 1_000,
        "user_id": OWNER,
        "channel_id": DM,
        "root_id": ROOT,
        "message": f"!forget {SECRET}",
    }
    return ApiPost(**(values | fields))


def test_only_the_owners_own_post_asks_for_a_forget(tmp_path: Path) -> None:
    ledger = Ledger(StateStore(tmp_path / "state.json"))
    ledger.load()
    ledger.state.horizon = 0
    inbox = Inbox(owner_id=OWNER, bot_id=BOT, channels=frozenset({DM}))
    board = Board(ledger)
    mine = inbox.post(api_post(), ledger.state, board)
    assert mine == Command(entries.Forget(SECRET, False), api_post())
    stranger = inbox.post(api_post(user_id="s" * 26), ledger.state, board)
    assert isinstance(stranger, Stranger)
    # what the model wrote, or a tool's result shown in a reply, is the bot's own post
    model = inbox.post(
        api_post(user_id=BOT, message=f"!forget --yes {SECRET}"), ledger.state, board
    )
    assert isinstance(model, Ignored)
    hooked = inbox.post(api_post(props={"from_webhook": "true"}), ledger.state, board)
    assert not isinstance(hooked, Command)


# -- in Mattermost, with a brokerd double ---------------------------------------------------


@dataclass
class Broker:
    """brokerd's owner socket as the bridge sees it: it previews and forgets."""

    forgets: list[proto.Forget] = field(default_factory=list)
    previews: list[str] = field(default_factory=list)
    waits: int = 0
    """How many `forget_progress` frames come before a forget's answer."""

    async def __call__(self, request: proto.Message, conn: proto.Connection) -> proto.Message:
        match request:
            case proto.ApprovalsList():
                return proto.Approvals(pending=[])
            case proto.ForgetPreview(text=text):
                self.previews.append(text)
                return proto.ForgetPreviewed(
                    holdings=[proto.Holding(store="audit", count=2, unit="records")]
                )
            case proto.Forget():
                self.forgets.append(request)
                for _ in range(self.waits):  # memoryd restarting: the owner is told, once
                    await conn.send(
                        proto.ForgetProgress(
                            step="prepare", gone=["memoryd"], waited_s=2, bound_s=60
                        )
                    )
                return proto.Forgotten(
                    plan="fg-abcdefghjkmn",
                    holdings=[proto.Holding(store="audit", count=2, unit="records")],
                )
            case _:
                raise AssertionError(f"brokerd was not to be asked {request!r}")


@dataclass
class Running:
    """The fake, the bridge in this loop, and brokerd's double."""

    world: World
    bridge: Bridge
    broker: Broker
    home: Path
    root: str
    team: str
    """A channel the bridge listens to, where a stranger may post too."""
    changed: trio.lowlevel.ParkingLot

    @property
    def mm(self) -> FakeMattermost:
        return self.world.mm

    def says(self, message: str) -> str:
        """The owner posts `message` in the thread; its id."""
        return str(self.mm.post(self.world.owner, self.world.dm, message, root_id=self.root)["id"])

    def live(self) -> list[Post]:
        return self.mm.live_posts(self.world.dm)

    def bot_posts(self) -> list[Post]:
        return [p for p in self.live() if p.user_id == self.world.bot.id]

    async def until(self, found: Callable[[], list[Post]]) -> Post:
        """The newest post `found` lists, once there is one."""
        while not found():
            await self.changed.park()
        return found()[-1]

    async def bot_says(self, words: str) -> Post:
        return await self.until(lambda: [p for p in self.bot_posts() if words in p.message])

    @property
    def state_file(self) -> Path:
        return self.home / "mattermost" / "state.json"


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    home = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    try:
        with trio.fail_after(CAP_S):
            async with open_world() as world, trio.open_nursery() as nursery:
                yield await _start(world, home, nursery)
                nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(home)


async def _start(world: World, home: Path, nursery: trio.Nursery) -> Running:
    mm, owner, bot, dm = world.mm, world.owner, world.bot, world.dm
    # what was said before: the owner's secret, boxmaker's answer and an approval's card
    root = str(mm.post(owner, dm, f"my locker code is {SECRET}")["id"])
    mm.post(bot, dm, f"Noted: `{SECRET.lower()}`.", root_id=root)
    mm.post(
        bot,
        dm,
        "",
        root_id=root,
        props={"boxmaker_approval": "ap-k3f9xy", "attachments": [{"text": f"add {SECRET}"}]},
    )
    mm.post(owner, dm, "and something else", root_id=root)
    team = mm.create_channel("team", owner, bot, world.stranger)
    settings = Settings(
        home=home,
        url=mm.url,
        token_file=home / "token",
        timeout_s=5.0,
        heartbeat_s=60.0,
        owner_id=owner.id,
        owner_name=owner.username,
        channel=team,
        update_s=0.2,
        loop_socket=home / "run" / "loop" / "s.sock",
        broker_socket=home / "run" / "broker" / "s.sock",
        memory_socket=home / "run" / "memory" / "s.sock",
        drain_s=1.0,
        call_timeout_s=5.0,
    )
    last = max(p.update_at for p in mm.live_posts(dm))
    settings.state_file.parent.mkdir(mode=0o700)
    store = StateStore(settings.state_file)
    state = holding_state()
    state.inflight = []  # a post in flight would start a turn; the unit test has them
    state.approvals = {}  # and brokerd's double waits on none
    state.horizon, state.channels = last + 1, {dm: last}
    store.save(state)
    (settings.state_file.parent / "state.json.damaged-1").write_bytes(
        b'{"version": 2, "inflight": [{"text": "' + SECRET.encode()
    )
    broker = Broker()
    await nursery.start(
        lambda task_status: proto.serve_unix(
            proto.OWNER_BROKER,
            settings.broker_socket,
            broker,
            shutdown=trio.Event(),
            task_status=task_status,
        )
    )
    changed = trio.lowlevel.ParkingLot()
    mm.watch(changed.unpark_all)
    bridge = Bridge(settings, bot.token)
    bridge.load()
    nursery.start_soon(bridge.run, trio.Event())
    await bridge.connected.wait()
    return Running(world, bridge, broker, home, root, team, changed)


def card_code(card: Post) -> str:
    found = re.search(r"Reply \*\*yes ([a-z0-9]{3})\*\*", card.message)
    assert found is not None, card.message
    return found[1]


async def shown(run: Running) -> Post:
    """The owner asks for the forget; the card that shows it."""
    run.says(f"!forget {SECRET.lower()}")
    card = await run.bot_says("Reply **yes")
    assert "forget `zebra-7731` (in any case) from every file that holds it:" in card.message
    assert "the Mattermost bridge's state: 2 records" in card.message  # a change, a copy
    assert "the audit log (its chain stays verifiable): 2 records" in card.message
    assert run.broker.previews == ["zebra-7731"]
    assert run.broker.forgets == []  # only shown
    return card


async def test_a_forget_is_shown_on_a_card_and_no_code_leaves_everything(
    running: Running,
) -> None:
    card = await shown(running)
    before = running.state_file.read_bytes()
    assert SECRET.encode() in before
    running.says(f"no {card_code(card)}")
    await running.bot_says("nothing changed")
    assert running.broker.forgets == []
    assert "cf-remove" in StateStore(running.state_file).load(now_ms=1).confirmations
    assert not all(holds_no_copy(p.message) for p in running.bot_posts())  # nothing edited


@pytest.mark.parametrize("how", ["reply", "reaction"])
async def test_yes_forgets_and_the_bridge_edits_its_posts_and_lists_the_owners(
    running: Running, how: str
) -> None:
    run = running
    card = await shown(run)
    if how == "reply":
        said = run.says(f"yes {card_code(card)}")
    else:
        run.mm.react(run.world.owner, card.id, "white_check_mark")
        said = card.id
    answer = await run.bot_says("in Mattermost:")

    [forget] = run.broker.forgets
    assert forget.text == "zebra-7731"
    assert (forget.surface.via, forget.surface.post) == ("mattermost", said)
    assert forget.session == session_of(run.root)

    assert holds_no_copy(answer.message)  # the answer never quotes the text
    assert "forgotten, everywhere boxmaker had written it:" in answer.message
    assert "the Mattermost bridge's state: 2 records" in answer.message  # the change, the copy
    # every post of the bridge's that held it now says [forgotten] instead, the card too
    assert all(holds_no_copy(msgspec.json.encode(p.to_json())) for p in run.bot_posts())
    assert "`[forgotten]`" in run.mm.store.posts[card.id].message
    [approval] = [p for p in run.bot_posts() if p.props.get("boxmaker_approval")]
    assert approval.props["attachments"] == [{"text": "add [forgotten]"}]
    assert "3 of boxmaker's posts held it: edited" in answer.message
    # the owner's own: the first message and the command itself, with links
    owners = [
        p.id
        for p in run.live()
        if p.user_id == run.world.owner.id and SECRET.lower() in p.message.lower()
    ]
    assert len(owners) == 2
    assert "2 of your own posts still hold it; only you can edit or delete them:" in answer.message
    for post_id in owners:
        assert f"- {run.mm.url}/_redirect/pl/{post_id}" in answer.message
    # the bridge's own files hold no copy
    assert holds_no_copy(run.state_file.read_bytes())
    assert not list(run.state_file.parent.glob("state.json.damaged-*"))  # torn: deleted
    assert list(StateStore(run.state_file).load(now_ms=1).confirmations) == ["cf-other"]


async def test_a_strangers_forget_does_nothing(running: Running) -> None:
    run = running
    channel = run.team
    run.mm.post(run.world.stranger, channel, f"!forget {SECRET}")
    run.says("!help")  # the owner's next command is answered: the stranger's was read first
    await run.bot_says("!forget")
    assert run.broker.previews == []
    assert not [p for p in run.mm.live_posts(channel) if p.user_id == run.world.bot.id]


def test_a_permalink_needs_no_team() -> None:
    assert permalink("https://chat.example.org/", "p" * 26) == (
        "https://chat.example.org/_redirect/pl/" + "p" * 26
    )


async def test_forget_with_yes_forgets_at_once_and_edits_its_answer_too(running: Running) -> None:
    run = running
    run.says(f"!forget --yes {SECRET}")
    swept = await run.bot_says("in Mattermost:")
    [forget] = run.broker.forgets
    assert forget.text == SECRET
    assert holds_no_copy(swept.message)
    assert "forgotten, everywhere boxmaker had written it:" in "\n".join(
        p.message for p in run.bot_posts()
    )
    assert all(holds_no_copy(msgspec.json.encode(p.to_json())) for p in run.bot_posts())
    assert holds_no_copy(run.state_file.read_bytes())


async def test_a_forget_waiting_for_a_role_says_so_in_the_thread_once(running: Running) -> None:
    run = running
    run.broker.waits = 3
    run.says(f"!forget --yes {SECRET}")
    await run.bot_says("in Mattermost:")
    said = [p.message for p in run.bot_posts()]
    waiting = [m for m in said if m.startswith("waiting for memoryd to come back")]
    assert waiting == ["waiting for memoryd to come back (not running): 2 s of at most 60 s"]
    assert said.index(waiting[0]) < next(i for i, m in enumerate(said) if "forgotten," in m)
