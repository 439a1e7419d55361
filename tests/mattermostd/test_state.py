"""The bridge's state file: version 3 round-trips, versions 1 and 2 are read once, damage is
set aside.

Version 1 is what bridges before issue 30 wrote: every field, `""` for "absent". The
files below are written as that code wrote them (field for field), not made by the
new code.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

import entries
import proto
from mattermostd._state import (
    DecidedInMattermost,
    Inflight,
    NoReplyPost,
    OpenApproval,
    OpenConfirmation,
    ReplyCreating,
    ReplyPosted,
    State,
    StateStore,
    Undecided,
    session_of,
)

NOW_MS = 1_765_000_000_000
ROOT = "r" * 26
DM = "d" * 26


def v1_inflight(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "post_id": "p" * 26,
        "channel_id": DM,
        "root_id": ROOT,
        "session": session_of(ROOT),
        "text": "hello",
        "create_at": 5,
        "said": False,
        "pending_post_id": "",
        "reply_id": "",
    }
    return values | fields


def v1_approval(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": "ap-k3f9xy",
        "session": session_of(ROOT),
        "channel_id": DM,
        "root_id": ROOT,
        "call_id": "call_1",
        "post_ids": ["h" * 26],
        "part_ids": [],
        "message": "boxmaker asks",
        "decided": "",
        "arguments": '{"action":"add","file":"memory","text":"tea"}',
        "revised": "",
    }
    return values | fields


def v1_file(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "version": 1,
        "horizon": 100,
        "channels": {DM: 900},
        "handled": {"q" * 26: 7},
        "inflight": [],
        "approvals": {},
        "strangers": ["s" * 26],
    }
    return values | fields


def store(tmp_path: Path, content: dict[str, Any] | bytes) -> StateStore:
    path = tmp_path / "state.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return StateStore(path)


def test_a_version_1_file_is_read_once_and_written_back_as_version_3(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = v1_file(
        inflight=[
            v1_inflight(post_id="a" * 26),
            v1_inflight(post_id="b" * 26, said=True, pending_post_id="bot:1"),
            v1_inflight(post_id="c" * 26, said=True, pending_post_id="bot:2", reply_id="y" * 26),
        ],
        approvals={
            "ap-waiting": v1_approval(id="ap-waiting"),
            "ap-revised": v1_approval(id="ap-revised", revised='{"action":"add"}'),
            "ap-decided": v1_approval(id="ap-decided", decided="**Approved**", revised="x"),
            "ap-legacy": v1_approval(id="ap-legacy", call_id="", arguments=""),
        },
    )
    states = store(tmp_path, old)
    with caplog.at_level(logging.INFO, logger="mattermostd.state"):
        state = states.load(now_ms=NOW_MS)
    assert "upgraded from version 1 to 3" in caplog.text
    assert (state.horizon, state.channels, state.handled) == (100, {DM: 900}, {"q" * 26: 7})
    assert state.strangers == ["s" * 26]
    assert [(i.said, i.reply_post) for i in state.inflight] == [
        (False, NoReplyPost()),
        (True, ReplyCreating(pending_post_id="bot:1")),
        (True, ReplyPosted(reply_id="y" * 26)),
    ]
    approvals = state.approvals
    assert approvals["ap-waiting"].status == Undecided()
    assert approvals["ap-revised"].status == Undecided(revised='{"action":"add"}')
    assert approvals["ap-decided"].status == DecidedInMattermost(text="**Approved**")
    assert approvals["ap-waiting"].call_id == "call_1"
    assert approvals["ap-waiting"].post_ids == ["h" * 26]
    assert approvals["ap-legacy"].call_id is UNSET
    assert approvals["ap-legacy"].arguments is UNSET
    # written back once: the file is version 3 now, and reads as the same state
    raw = json.loads(states.path.read_bytes())
    assert raw["version"] == 3
    assert '""' not in states.path.read_text()  # no empty string stands for "absent"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mattermostd.state"):
        assert states.load(now_ms=NOW_MS) == state
    assert "upgraded" not in caplog.text
    assert not list(tmp_path.glob("*.damaged-*"))


@pytest.mark.parametrize(
    "content",
    [
        b'{"version": 1, "inflight": [{"post_id": 5}]',  # cut short
        json.dumps(v1_file(inflight=[{"post_id": "p" * 26}])).encode(),  # a field missing
        json.dumps(v1_file(approvals={"ap-x": v1_approval(decided=3)})).encode(),
        json.dumps(v1_file(version=4)).encode(),  # a version this bridge does not know
        json.dumps({"horizon": 1}).encode(),  # no version at all
    ],
)
def test_a_damaged_state_file_is_set_aside_and_the_bridge_starts_from_now(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    states = store(tmp_path, content)
    with caplog.at_level(logging.ERROR, logger="mattermostd.state"):
        state = states.load(now_ms=NOW_MS)
    assert state == State(horizon=NOW_MS)
    [aside] = tmp_path.glob("state.json.damaged-*")
    assert aside.name == f"state.json.damaged-{NOW_MS}"
    assert aside.read_bytes() == content  # kept as it was, for the owner to look at
    assert "runbook: mattermost-state-damaged" in caplog.text
    assert states.load(now_ms=NOW_MS + 1) == state  # the new file is whole


def test_a_new_state_file_starts_from_now(tmp_path: Path) -> None:
    states = StateStore(tmp_path / "mattermost" / "state.json")
    assert states.load(now_ms=NOW_MS) == State(horizon=NOW_MS)
    assert json.loads(states.path.read_bytes()) == {"version": 3, "horizon": NOW_MS}


# -- every shape round-trips, and every version 1 record reads as what it meant ----------

IDS = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=26)
TEXT = st.text(max_size=30)
REPLY_POSTS = st.one_of(
    st.just(NoReplyPost()),
    st.builds(ReplyCreating, pending_post_id=IDS),
    st.builds(ReplyPosted, reply_id=IDS),
)
STATUSES = st.one_of(
    st.builds(Undecided, revised=st.just(UNSET) | TEXT),
    st.builds(DecidedInMattermost, text=TEXT),
)
INFLIGHT = st.builds(
    Inflight,
    post_id=IDS,
    channel_id=IDS,
    root_id=IDS,
    session=IDS,
    text=TEXT,
    create_at=st.integers(0, 2**53),
    said=st.booleans(),
    reply_post=REPLY_POSTS,
)
APPROVALS = st.builds(
    OpenApproval,
    id=IDS,
    session=IDS,
    channel_id=IDS,
    root_id=IDS,
    message=TEXT,
    arguments=st.just(UNSET) | TEXT,
    call_id=st.just(UNSET) | IDS,
    post_ids=st.lists(IDS, max_size=3),
    part_ids=st.lists(IDS, max_size=3),
    status=STATUSES,
)
STATES = st.builds(
    State,
    horizon=st.integers(0, 2**53),
    channels=st.dictionaries(IDS, st.integers(0, 2**53), max_size=3),
    handled=st.dictionaries(IDS, st.integers(0, 2**53), max_size=3),
    inflight=st.lists(INFLIGHT, max_size=3),
    approvals=st.dictionaries(IDS, APPROVALS, max_size=3),
    strangers=st.lists(IDS, max_size=3),
)


@given(STATES)
def test_a_version_3_state_round_trips(state: State) -> None:
    assert msgspec.json.decode(msgspec.json.encode(state), type=State) == state


@given(
    said=st.booleans(),
    pending=st.just("") | IDS,
    reply=st.just("") | IDS,
)
def test_a_version_1_post_in_flight_reads_as_where_its_reply_was(
    tmp_path_factory: pytest.TempPathFactory, said: bool, pending: str, reply: str
) -> None:
    old = v1_inflight(said=said, pending_post_id=pending, reply_id=reply)
    states = store(tmp_path_factory.mktemp("state"), v1_file(inflight=[old]))
    [inflight] = states.load(now_ms=NOW_MS).inflight
    assert inflight.said == said
    if reply:
        assert inflight.reply_post == ReplyPosted(reply_id=reply)
    elif pending:
        assert inflight.reply_post == ReplyCreating(pending_post_id=pending)
    else:
        assert inflight.reply_post == NoReplyPost()


@given(
    decided=st.just("") | TEXT,
    revised=st.just("") | TEXT,
    call_id=st.just("") | IDS,
    arguments=st.just("") | TEXT,
)
def test_a_version_1_approval_reads_as_what_it_meant(
    tmp_path_factory: pytest.TempPathFactory,
    decided: str,
    revised: str,
    call_id: str,
    arguments: str,
) -> None:
    old = v1_approval(decided=decided, revised=revised, call_id=call_id, arguments=arguments)
    states = store(tmp_path_factory.mktemp("state"), v1_file(approvals={"ap-k3f9xy": old}))
    approval = states.load(now_ms=NOW_MS).approvals["ap-k3f9xy"]
    if decided:  # decided: nothing more to revise
        assert approval.status == DecidedInMattermost(text=decided)
    else:
        assert approval.status == Undecided(revised=revised or UNSET)
    assert approval.call_id == (call_id or UNSET)
    assert approval.arguments == (arguments or UNSET)


def test_a_version_2_file_whose_card_has_an_untagged_edit_is_read_once_as_version_3(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A version 2 file, as bridges before issue 31 wrote it: a card's edit had no `type`."""
    old = {
        "version": 2,
        "horizon": 100,
        "channels": {DM: 900},
        "inflight": [{**v1_inflight(), "reply_post": {"kind": "none"}}],
        "confirmations": {
            "cf-abc7m2": {
                "id": "cf-abc7m2",
                "channel_id": DM,
                "root_id": ROOT,
                "proposal": {"edit": {"action": "remove", "file": "memory", "old": "Tea."}},
                "post_id": "c" * 26,
            },
            "cf-undo22": {
                "id": "cf-undo22",
                "channel_id": DM,
                "root_id": ROOT,
                "proposal": {
                    "edit": {"action": "add", "file": "user", "text": "Tea."},
                    "undoes": "ed-4k2x9q",
                },
            },
        },
    }
    for stale in ("pending_post_id", "reply_id"):
        del old["inflight"][0][stale]  # type: ignore[index]
    states = store(tmp_path, old)
    with caplog.at_level(logging.INFO, logger="mattermostd.state"):
        state = states.load(now_ms=NOW_MS)
    assert "upgraded from version 2 to 3" in caplog.text
    removal = state.confirmations["cf-abc7m2"]
    assert removal.proposal == entries.Proposal(edit=proto.MemoryRemove(file="memory", old="Tea."))
    assert removal.post_id == "c" * 26
    undo = state.confirmations["cf-undo22"].proposal
    assert undo == entries.Proposal(
        edit=proto.MemoryAdd(file="user", text="Tea."), undoes="ed-4k2x9q"
    )
    assert state.confirmations["cf-undo22"].post_id is UNSET
    assert state.inflight[0].text == "hello"
    raw = json.loads(states.path.read_bytes())
    assert raw["version"] == 3
    assert raw["confirmations"]["cf-abc7m2"]["proposal"]["type"] == "edit"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mattermostd.state"):
        assert states.load(now_ms=NOW_MS) == state  # and reads as itself from now on
    assert "upgraded" not in caplog.text


def test_a_forgets_card_round_trips_beside_an_edits(tmp_path: Path) -> None:
    states = StateStore(tmp_path / "state.json")
    state = State(
        confirmations={
            "cf-forget": OpenConfirmation(
                id="cf-forget",
                channel_id=DM,
                root_id=ROOT,
                proposal=entries.ForgetProposal(text="ZEBRA-7731"),
            ),
            "cf-remove": OpenConfirmation(
                id="cf-remove",
                channel_id=DM,
                root_id=ROOT,
                proposal=entries.Proposal(edit=proto.MemoryRemove(file="memory", old="x")),
            ),
        }
    )
    states.save(state)
    assert states.load(now_ms=NOW_MS) == state
