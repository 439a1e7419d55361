"""The owner's `!` commands in Mattermost: parsed from the owner's posts only, never sent
to the model; and `edit CODE: …` on a waiting approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mattermostd._answers import (
    parse_revision,
)
from mattermostd._api import Post
from mattermostd._board import Board
from mattermostd._commands import (
    Forget,
    Help,
    Remember,
    ShowMemory,
    Undo,
    Unknown,
    Why,
    parse_command,
    unescaped,
)
from mattermostd._inbox import Command, ForSession, Inbox, Revises, Stranger
from mattermostd._ledger import Ledger
from mattermostd._state import OpenApproval, StateStore, session_of

OWNER = "o" * 26
STRANGER = "s" * 26
DM = "d" * 26
ROOT = "r" * 26


@pytest.mark.parametrize(
    ("message", "command"),
    [
        ("!remember my daughter's name is Ines", Remember("my daughter's name is Ines")),
        ("  !Remember   --user prefers tea ", Remember("prefers tea", "user")),
        ("!forget Ines", Forget("Ines")),
        ("!forget --yes Ines", Forget("Ines", confirmed=True)),
        ("!forget --user --yes tea", Forget("tea", "user", True)),
        ("!why tea", Why("tea")),
        ("!undo", Undo()),
        ("!undo ed-4k2x9q --yes", Undo("ed-4k2x9q", True)),
        ("!undo --yes ed-4k2x9q", Undo("ed-4k2x9q", True)),
        ("!memory", ShowMemory()),
        ("!help", Help()),
    ],
)
def test_the_owners_commands(message: str, command: object) -> None:
    assert parse_command(message) == command


@pytest.mark.parametrize(
    "message",
    ["!remember", "!forget", "!why  ", "!undo yesterday", "!teleport me", "!memory of you"],
)
def test_a_command_without_what_it_needs_is_said_so(message: str) -> None:
    parsed = parse_command(message)
    assert isinstance(parsed, Unknown)
    assert parsed.problem


@pytest.mark.parametrize(
    "message", ["remember this", "!! important", "!!remember x", "! not", "hi !remember x", ""]
)
def test_anything_else_is_a_message(message: str) -> None:
    assert parse_command(message) is None


def test_a_double_bang_is_the_message_with_one() -> None:
    assert unescaped("!!remember is a word") == "!remember is a word"
    assert unescaped("plain") == "plain"


@given(st.text(max_size=80))
def test_any_post_is_a_command_or_a_message_never_an_exception(message: str) -> None:
    parsed = parse_command(message)
    if parsed is not None:
        assert message.strip().startswith("!")
        assert not message.strip().startswith("!!")


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


def test_only_the_owners_own_post_is_a_command_or_an_edit(tmp_path: Path) -> None:
    ledger = Ledger(StateStore(tmp_path / "state.json"))
    ledger.load()
    ledger.state.horizon = 0
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
    board = Board(ledger)
    inbox = Inbox(owner_id=OWNER, bot_id="b" * 26, channels=frozenset({DM}))
    mine = inbox.post(post(message="!remember tea"), ledger.state, board)
    assert mine == Command(Remember("tea"), post(message="!remember tea"))
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
