"""The bridge's rooms without a socket: the inbox's reading of events, the ledger's
write-ahead saves, the approval board's lookups, and the stream's tagged events."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mattermostd._answers import OwnerApproves, OwnerDenies
from mattermostd._api import Post, Reaction
from mattermostd._board import Board
from mattermostd._inbox import (
    INTEGRATION_PROPS,
    Answers,
    Empty,
    ForSession,
    Ignored,
    Inbox,
    Integration,
    Stranger,
    Unconfirmed,
)
from mattermostd._ledger import Ledger
from mattermostd._state import Inflight, OpenApproval, State, StateStore, session_of, thread_of
from mattermostd._stream import Posted, PostEdited, ReactionAdded, parse_event

OWNER = "o" * 26
BOT = "b" * 26
STRANGER = "s" * 26
DM = "d" * 26
OTHER = "x" * 26
ROOT = "r" * 26


def post(**fields: Any) -> Post:
    values: dict[str, Any] = {
        "id": "p" * 26,
        "create_at": 1_000,
        "update_at": 1_000,
        "user_id": OWNER,
        "channel_id": DM,
        "message": "hello",
    }
    values.update(fields)
    return Post(**values)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(StateStore(tmp_path / "state.json"))
    ledger.load()
    ledger.state.horizon = 0  # a new ledger starts from now; these posts are from 1970
    return ledger


@pytest.fixture
def inbox() -> Inbox:
    return Inbox(owner_id=OWNER, bot_id=BOT, channels=frozenset({DM}))


def open_approval(ledger: Ledger, **fields: Any) -> OpenApproval:
    values: dict[str, Any] = {
        "id": "ap-k3f9xy",
        "session": session_of(ROOT),
        "call_id": "call_1",
        "channel_id": DM,
        "root_id": ROOT,
        "message": "boxmaker asks",
        "arguments": '{"action":"add","file":"memory","text":"tea"}',
    }
    values.update(fields)
    approval = OpenApproval(**values)
    ledger.approval_opened(approval)
    return approval


# -- the inbox ---------------------------------------------------------------------------


def test_an_owner_post_is_a_message_for_its_threads_session(inbox: Inbox, ledger: Ledger) -> None:
    meaning = inbox.post(post(root_id=ROOT), ledger.state, Board(ledger))
    assert isinstance(meaning, ForSession)
    assert meaning.inflight.session == f"mm-{ROOT}"
    assert meaning.inflight.root_id == ROOT
    assert not meaning.approval_waiting
    top = inbox.post(post(id="q" * 26), ledger.state, Board(ledger))
    assert isinstance(top, ForSession)
    assert top.inflight.session == session_of("q" * 26)  # a new thread: its own session


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"channel_id": OTHER}, Ignored),
        ({"delete_at": 5}, Ignored),
        ({"original_id": "z" * 26}, Ignored),
        ({"type": "system_join_channel"}, Ignored),
        ({"user_id": BOT}, Ignored),
        ({"user_id": STRANGER}, Stranger),
        ({"props": {"from_webhook": "true"}}, Integration),
        ({"props": {"override_username": "ci"}}, Integration),
        ({"props": {"from_plugin": True}}, Integration),
        ({"message": "  \n"}, Empty),
        ({"root_id": "../../etc"}, Ignored),
        ({"create_at": 10}, Ignored),  # before the horizon
    ],
)
def test_what_a_post_means(
    inbox: Inbox, ledger: Ledger, fields: dict[str, Any], kind: type
) -> None:
    ledger.state.horizon = 100
    assert isinstance(inbox.post(post(**fields), ledger.state, Board(ledger)), kind)


def test_a_post_known_to_the_ledger_is_not_read_again(inbox: Inbox, ledger: Ledger) -> None:
    first = inbox.post(post(), ledger.state, Board(ledger))
    assert isinstance(first, ForSession)
    ledger.accept(first.inflight)
    assert isinstance(inbox.post(post(), ledger.state, Board(ledger)), Ignored)
    ledger.answered(first.inflight)
    assert isinstance(inbox.post(post(), ledger.state, Board(ledger)), Ignored)


def test_a_yes_naming_the_cards_code_in_a_thread_with_a_waiting_approval_answers_it(
    inbox: Inbox, ledger: Ledger
) -> None:
    open_approval(ledger)  # ap-k3f9xy: its card's code is "9xy"
    board = Board(ledger)
    said = post(root_id=ROOT, message="yes 9xy")
    assert inbox.post(said, ledger.state, board) == Answers(
        "ap-k3f9xy", OwnerApproves(), "a reply", said
    )
    no = inbox.post(post(root_id=ROOT, message="no 9xy: not that"), ledger.state, board)
    assert isinstance(no, Answers)
    assert no.answer == OwnerDenies("not that")
    bare = inbox.post(post(root_id=ROOT, message="yes"), ledger.state, board)
    assert isinstance(bare, Unconfirmed)  # a plugin's canned "yes" in the owner's name
    more = inbox.post(post(root_id=ROOT, message="yes 9xy, but shorter"), ledger.state, board)
    assert isinstance(more, ForSession)  # words for the model, not a decision
    assert more.approval_waiting
    elsewhere = inbox.post(post(root_id="q" * 26, message="yes 9xy"), ledger.state, board)
    assert isinstance(elsewhere, ForSession)  # no approval waits in that thread


def test_only_the_owners_check_or_cross_on_a_waiting_approval_decides(
    inbox: Inbox, ledger: Ledger
) -> None:
    approval = open_approval(ledger)
    ledger.approval_post(approval, "h" * 26, part=False)
    ledger.approval_post(approval, "t" * 26, part=True)
    board = Board(ledger)

    def react(user: str, emoji: str, on: str = "h" * 26) -> object:
        return inbox.reaction(Reaction(user_id=user, post_id=on, emoji_name=emoji), board)

    assert react(OWNER, "white_check_mark") == Answers("ap-k3f9xy", OwnerApproves(), "a reaction")
    assert react(OWNER, "x", on="t" * 26) == Answers("ap-k3f9xy", OwnerDenies(), "a reaction")
    assert isinstance(react(OWNER, "thumbsup"), Ignored)
    assert isinstance(react(STRANGER, "white_check_mark"), Stranger)
    assert isinstance(react(BOT, "white_check_mark"), Ignored)
    assert isinstance(react(OWNER, "white_check_mark", on="q" * 26), Ignored)
    ledger.approval_decided(approval, "**Approved**")
    assert isinstance(react(OWNER, "x"), Ignored)


IDS = st.sampled_from([OWNER, BOT, STRANGER])
PROPS = st.dictionaries(
    st.sampled_from([*INTEGRATION_PROPS, "boxmaker_reply_to", "unsafe_links"]),
    st.sampled_from(["", "true", "false", True, False, None]),
    max_size=3,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    user=IDS,
    props=PROPS,
    message=st.text(max_size=20) | st.sampled_from(["yes 9xy", "no 9xy", "y", "approve 9xy"]),
    root=st.sampled_from(["", ROOT]),
)
def test_only_the_owners_own_hand_is_ever_a_message_or_an_answer(
    inbox: Inbox, ledger: Ledger, user: str, props: dict[str, Any], message: str, root: str
) -> None:
    if not ledger.state.approvals:
        open_approval(ledger)
    meaning = inbox.post(
        post(user_id=user, props=props, message=message, root_id=root), ledger.state, Board(ledger)
    )
    if isinstance(meaning, ForSession | Answers):
        assert user == OWNER
        assert not any(props.get(p) not in (None, "", False, "false") for p in INTEGRATION_PROPS)


def test_an_edit_is_never_a_message(inbox: Inbox) -> None:
    assert inbox.edit(post(message="changed")).noted
    assert not inbox.edit(post(user_id=STRANGER)).noted


def test_a_session_is_its_threads_root() -> None:
    assert thread_of(session_of(ROOT)) == ROOT
    assert thread_of("chat-abcdefgh") is None


# -- the ledger --------------------------------------------------------------------------


def reloaded(path: Path) -> State:
    return msgspec.json.decode(path.read_bytes(), type=State)


def test_every_change_is_on_disk_before_the_method_returns(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    ledger = Ledger(StateStore(path))
    ledger.load()
    inflight = Inflight(
        post_id="p" * 26,
        channel_id=DM,
        root_id=ROOT,
        session=session_of(ROOT),
        text="hi",
        create_at=5,
    )
    steps: list[Callable[[], object]] = [
        lambda: ledger.accept(inflight),
        lambda: ledger.said(inflight),
        lambda: ledger.reply_creating(inflight, "bot:1"),
        lambda: ledger.reply_made(inflight, "y" * 26),
        lambda: ledger.handled("h" * 26, 7),
        lambda: ledger.stranger(STRANGER),
        lambda: open_approval(ledger),
        lambda: ledger.approval_post(ledger.state.approvals["ap-k3f9xy"], "a" * 26, part=False),
        lambda: ledger.approval_revised(ledger.state.approvals["ap-k3f9xy"], '{"action":"add"}'),
        lambda: ledger.approval_call(ledger.state.approvals["ap-k3f9xy"], "call_2", "{}"),
        lambda: ledger.approval_decided(ledger.state.approvals["ap-k3f9xy"], "**Approved**"),
        lambda: ledger.approval_closed("ap-k3f9xy"),
        lambda: ledger.unsaid(inflight),
        lambda: ledger.reply_lost(inflight),
        lambda: ledger.answered(inflight),
    ]
    for step in steps:
        step()
        assert reloaded(path) == ledger.state  # written down before the step is taken
    assert reloaded(path).handled == {"h" * 26: 7, "p" * 26: 5}
    assert reloaded(path).inflight == []


def test_a_stranger_is_noted_once(ledger: Ledger) -> None:
    assert ledger.stranger(STRANGER)
    assert not ledger.stranger(STRANGER)


def test_the_place_in_a_channel_only_moves_forward_and_is_saved_at_a_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    ledger = Ledger(StateStore(path))
    ledger.load()
    ledger.saw(DM, 50)
    ledger.saw(DM, 40)
    assert ledger.state.channels[DM] == 50
    ledger.checkpoint()
    assert reloaded(path).channels[DM] == 50


# -- the board ---------------------------------------------------------------------------


def test_the_board_finds_an_approval_by_id_post_thread_and_call(ledger: Ledger) -> None:
    approval = open_approval(ledger)
    open_approval(
        ledger, id="ap-other1", root_id="q" * 26, session=session_of("q" * 26), call_id="c2"
    )
    ledger.approval_post(approval, "h" * 26, part=False)
    board = Board(ledger)
    assert board.get("ap-k3f9xy") is approval
    assert board.of_post("h" * 26) is approval
    assert board.waiting_in(ROOT) is approval
    assert board.of_call(session_of(ROOT), "call_1") is approval
    assert board.of_call(session_of(ROOT), "c2") is None  # a call id names a call in a session
    assert [a.id for a in board.of_session(session_of(ROOT))] == ["ap-k3f9xy"]
    ledger.approval_decided(approval, "**Denied**")
    assert board.waiting_in(ROOT) is None
    assert board.of_post("h" * 26) is approval  # its posts still say the outcome later


def test_a_decision_is_sent_once_while_it_is_on_its_way(ledger: Ledger) -> None:
    board = Board(ledger)
    assert board.start_deciding("ap-k3f9xy")
    assert not board.start_deciding("ap-k3f9xy")
    board.done_deciding("ap-k3f9xy")
    assert board.start_deciding("ap-k3f9xy")


# -- the stream's events -----------------------------------------------------------------


def event(name: str, **data: object) -> str:
    return json.dumps({"event": name, "data": data, "seq": 1})


def test_events_are_tagged_structs() -> None:
    body = msgspec.json.encode(post()).decode()
    assert parse_event(event("posted", post=body)) == Posted(post=post())
    assert parse_event(event("post_edited", post=body)) == PostEdited(post=post())
    reaction = {"user_id": OWNER, "post_id": "p" * 26, "emoji_name": "x"}
    assert parse_event(event("reaction_added", reaction=json.dumps(reaction))) == ReactionAdded(
        reaction=Reaction(user_id=OWNER, post_id="p" * 26, emoji_name="x")
    )
    assert parse_event(event("typing", parent_id="")) is None
    assert parse_event(event("posted", post={"id": "not a string"})) is None
    assert parse_event(event("posted", post='{"no id": 1}')) is None


@given(st.binary(max_size=200) | st.text(max_size=200))
def test_any_message_is_an_event_or_none(raw: bytes | str) -> None:
    assert parse_event(raw) is None or isinstance(
        parse_event(raw), Posted | PostEdited | ReactionAdded
    )
