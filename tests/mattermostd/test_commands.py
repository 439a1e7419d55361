"""The owner's `!` commands in Mattermost: read from the owner's posts only (the grammar is
`entries.parse_command`'s, tested there), never sent to the model; a change's card
answered by `yes CODE`, `no CODE` or a reaction; and `edit CODE: …` on a waiting approval."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import entries
import proto
from mattermostd._answers import OwnerApproves, OwnerDenies, parse_revision
from mattermostd._api import Post, Reaction
from mattermostd._board import Board
from mattermostd._inbox import (
    Answers,
    Command,
    Confirms,
    ForSession,
    Ignored,
    Inbox,
    Revises,
    Stranger,
    Unconfirmed,
)
from mattermostd._ledger import Ledger
from mattermostd._state import OpenApproval, OpenConfirmation, StateStore, session_of

OWNER = "o" * 26
STRANGER = "s" * 26
DM = "d" * 26
ROOT = "r" * 26


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ("edit 9xy: Owner drinks green tea.", "Owner drinks green tea."),
        ("Edit 9XY:  spaced  ", "spaced"),
        ("edit 9xz: wrong code", None),
        ("edit: no code", None),
        ("edit 9xy:", None),
        ("please edit 9xy: x", None),
    ],
)
def test_edit_names_the_cards_code(message: str, text: str | None) -> None:
    assert parse_revision(message, "9xy") == text


def post(**fields: Any) -> Post:
    values: dict[str, Any] = {
        "id": "p" * 26,
        "create_at": 1_000,
        "update_at": 1_000,
        "user_id": OWNER,
        "channel_id": DM,
        "root_id": ROOT,
        "message": "hello",
    }
    values.update(fields)
    return Post(**values)


def card(ident: str = "cf-abc7m2", post_id: str = "c" * 26) -> OpenConfirmation:
    proposal = entries.Proposal(edit=proto.MemoryRemove(file="memory", old="Owner drinks tea."))
    return OpenConfirmation(
        id=ident, channel_id=DM, root_id=ROOT, proposal=proposal, post_id=post_id
    )


def waiting(tmp_path: Path, *cards: OpenConfirmation, approval: bool = False) -> Ledger:
    ledger = Ledger(StateStore(tmp_path / "state.json"))
    ledger.load()
    ledger.state.horizon = 0
    for one in cards:
        ledger.confirmation_opened(one)
    if approval:
        ledger.approval_opened(
            OpenApproval(
                id="ap-k3f9xy",
                session=session_of(ROOT),
                call_id="c1",
                channel_id=DM,
                root_id=ROOT,
                message="boxmaker asks",
            )
        )
    return ledger


def test_only_the_owners_own_post_is_a_command_or_an_edit(tmp_path: Path) -> None:
    ledger = waiting(tmp_path, approval=True)
    board = Board(ledger)
    inbox = Inbox(owner_id=OWNER, bot_id="b" * 26, channels=frozenset({DM}))
    mine = inbox.post(post(message="!remember tea"), ledger.state, board)
    assert mine == Command(entries.Remember("tea"), post(message="!remember tea"))
    theirs = inbox.post(post(message="!remember tea", user_id=STRANGER), ledger.state, board)
    assert isinstance(theirs, Stranger)
    hooked = inbox.post(
        post(message="!undo --yes", props={"from_webhook": "true"}), ledger.state, board
    )
    assert not isinstance(hooked, Command)
    revised = inbox.post(post(message="edit 9xy: green tea"), ledger.state, board)
    assert revised == Revises("ap-k3f9xy", "green tea", post(message="edit 9xy: green tea"))
    escaped = inbox.post(post(message="!!remember is a verb"), ledger.state, board)
    assert isinstance(escaped, ForSession)
    assert escaped.inflight.text == "!remember is a verb"


Expect = Callable[[Post], object]


@pytest.mark.parametrize(
    ("message", "expect"),
    [
        ("yes 7m2", lambda p: Confirms("cf-abc7m2", OwnerApproves(), "a reply", p)),
        ("No 7M2", lambda p: Confirms("cf-abc7m2", OwnerDenies(), "a reply", p)),
        ("no 7m2 not now", lambda p: Confirms("cf-abc7m2", OwnerDenies("not now"), "a reply", p)),
        ("yes 9xy", lambda p: Answers("ap-k3f9xy", OwnerApproves(), "a reply", p)),
        ("yes", lambda p: Unconfirmed(("7m2", "9xy"), p)),
        ("yes 7m3", lambda p: Unconfirmed(("7m2", "9xy"), p)),
        ("yes m2 and my bike", None),
        ("yes 7m2, and also remember my bike", None),
    ],
)
def test_a_reply_naming_a_cards_code_answers_that_card(
    tmp_path: Path, message: str, expect: Expect | None
) -> None:
    ledger = waiting(tmp_path, card(), approval=True)
    inbox = Inbox(owner_id=OWNER, bot_id="b" * 26, channels=frozenset({DM}))
    said = post(message=message)
    found = inbox.post(said, ledger.state, Board(ledger))
    if expect is None:
        assert isinstance(found, ForSession)  # words for the model
    else:
        assert found == expect(said)


def test_a_reaction_on_a_changes_card_answers_it_and_only_the_owners(tmp_path: Path) -> None:
    ledger = waiting(tmp_path, card())
    board = Board(ledger)
    inbox = Inbox(owner_id=OWNER, bot_id="b" * 26, channels=frozenset({DM}))

    def react(user: str, emoji: str, on: str = "c" * 26) -> object:
        return inbox.reaction(
            Reaction(user_id=user, post_id=on, emoji_name=emoji, create_at=1_000), board
        )

    assert react(OWNER, "white_check_mark") == Confirms("cf-abc7m2", OwnerApproves(), "a reaction")
    assert react(OWNER, "x") == Confirms("cf-abc7m2", OwnerDenies(), "a reaction")
    assert isinstance(react(OWNER, "thumbsup"), Ignored)
    assert isinstance(react(STRANGER, "white_check_mark"), Stranger)
    assert isinstance(react("b" * 26, "white_check_mark"), Ignored)
    assert isinstance(react(OWNER, "white_check_mark", on="q" * 26), Ignored)


def test_a_card_is_answered_once_and_survives_a_restart(tmp_path: Path) -> None:
    waiting(tmp_path, card())
    again = Ledger(StateStore(tmp_path / "state.json"))
    again.load()  # the bridge restarted: the card still waits, with the exact change
    assert again.state.confirmations["cf-abc7m2"] == card()
    assert again.confirmation_closed("cf-abc7m2") == card()
    assert again.confirmation_closed("cf-abc7m2") is None  # a second yes finds nothing
    third = Ledger(StateStore(tmp_path / "state.json"))
    third.load()
    assert third.state.confirmations == {}
