"""`forget TEXT`: its grammar, its steps (preview, surface, confirm, forget) and its words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import entries
import proto
from entries import Answer, Ask, Confirm, Forget, ForgetProposal, Usage, parse_command
from entries._forget import describe_forgotten, describe_progress
from proto import ForgetApplied, ForgetApply, ForgetLook, ForgetLooked, Holding

from .test_entries_desk import HERE, play

PREVIEWED = proto.ForgetPreviewed(
    holdings=[
        Holding(store="sessions", count=3, unit="messages", names=["chat-aaaaaaaa"]),
        Holding(store="audit", count=2, unit="records"),
        Holding(store="index", count=0, unit="rows"),
    ],
    entries=[proto.ForgetEntry(file="archive", entry="Locker code: ZEBRA-7731")],
    near=["the zebra code ends 7731"],
)
OWN = ForgetLooked(holdings=[Holding(store="chat history", count=1, unit="lines")])


def run(command: entries.OwnerCommand, replies: list[proto.Message]) -> tuple[list[Ask], object]:
    steps = entries.run_command(command, surface=HERE, session="chat-aaaaaaaa", where="chat")
    return play(steps, replies)


def test_forget_parses_its_text_whole_and_only_takes_yes() -> None:
    assert parse_command("/forget ZEBRA-7731", "/") == Forget("ZEBRA-7731")
    assert parse_command("!forget --yes my PIN 4711", "!") == Forget("my PIN 4711", True)
    assert parse_command("/remove tea", "/") == entries.Remove("tea")
    refused = parse_command("/forget --user x", "/")
    assert isinstance(refused, Usage)
    assert "--yes" in refused.problem


@given(st.text(max_size=1))
def test_forget_of_less_than_two_characters_is_a_usage(text: str) -> None:
    parsed = parse_command("/forget " + text, "/")
    assert isinstance(parsed, Usage)
    assert "at least 2 characters" in parsed.problem


def test_forget_previews_at_brokerd_and_the_surface_then_asks() -> None:
    asked, result = run(Forget("ZEBRA-7731"), [PREVIEWED, OWN])
    assert asked == [
        Ask("brokerd", proto.ForgetPreview(text="ZEBRA-7731")),
        Ask("surface", ForgetLook(text="ZEBRA-7731")),
    ]
    assert isinstance(result, Confirm)
    assert result.proposal == ForgetProposal(text="ZEBRA-7731")
    shown = entries.to_plain(result.question)
    for said in (
        "archive.md: this entry goes, whole:",
        "session messages: 3 messages",
        "the audit log (its chain stays verifiable): 2 records",
        "the chat's input history: 1 line",
        "the zebra code ends 7731",
        "copies already sent to the model server",
        "cannot be undone",
    ):
        assert said in shown, said
    assert "the recall index" not in shown  # a store holding nothing is not listed


def test_nothing_holding_it_answers_without_asking() -> None:
    nothing = proto.ForgetPreviewed(holdings=[Holding(store="audit", count=0, unit="records")])
    _, result = run(Forget("never said"), [nothing, ForgetLooked(holdings=[])])
    assert isinstance(result, Answer)
    assert not result.ok
    assert "nothing boxmaker wrote holds" in entries.to_plain(result)


def test_a_confirmed_forget_goes_to_brokerd_then_the_surface_and_never_quotes_it() -> None:
    forgotten = proto.Forgotten(
        plan="fg-abcdefabcdef",
        holdings=[Holding(store="journal", count=2, unit="lines")],
        left=[
            proto.PartLeft(
                part="loopd",
                why="loopd is not running (waited 1 min for it)",
                holdings=[Holding(store="sessions", count=3, unit="messages")],
            )
        ],
    )
    own = ForgetApplied(plan="fg-abcdefabcdef")
    asked, result = run(Forget("ZEBRA-7731", confirmed=True), [PREVIEWED, OWN, forgotten, own])
    assert asked[2] == Ask(
        "brokerd", proto.Forget(text="ZEBRA-7731", surface=HERE, session="chat-aaaaaaaa")
    )
    assert asked[3] == Ask("surface", ForgetApply(plan="fg-abcdefabcdef", text="ZEBRA-7731"))
    assert isinstance(result, Answer)
    after = entries.to_plain(result).split("cannot be undone")[-1]
    assert "ZEBRA-7731" not in after
    assert "loopd is not running" in after


def said(forgotten: proto.Forgotten) -> str:
    return entries.to_terminal(describe_forgotten(forgotten, ForgetApplied(plan=forgotten.plan)))


JOURNAL = Holding(store="journal", count=2, unit="lines")
SESSIONS = Holding(store="sessions", count=3, unit="messages")


def test_what_a_forget_did_is_told_from_its_outcome() -> None:
    done = proto.Forgotten(plan="fg-abcdefabcdef", holdings=[JOURNAL, SESSIONS])
    assert said(done) == (
        "forgotten, everywhere boxmaker had written it:\n"
        "  the edit journal (those edits can no longer be undone): 2 lines\n"
        "  session messages: 3 messages"
    )
    left = proto.Forgotten(
        plan="fg-abcdefabcdef",
        holdings=[JOURNAL],
        left=[proto.PartLeft(part="loopd", why="loopd is not running", holdings=[SESSIONS])],
        denied=["ap-7k2m4x"],
    )
    assert said(left) == (
        "forgotten from:\n"
        "  the edit journal (those edits can no longer be undone): 2 lines\n"
        "decided, and still to finish (by itself, once each role answers again; nothing for "
        "you to do):\n"
        "  loopd: loopd is not running\n"
        "    session messages: 3 messages\n"
        "denied the pending approvals that held it: ap-7k2m4x"
    )
    lost = proto.Forgotten(
        plan="fg-abcdefabcdef",
        holdings=[JOURNAL],
        lost=[proto.PartLeft(part="loopd", why="loopd could not do it")],
    )
    answer = describe_forgotten(lost, ForgetApplied(plan="fg-abcdefabcdef"))
    assert not answer.ok
    assert entries.to_plain(answer).endswith(
        "loopd no longer had its plan of this forget: what it holds of the text stays there; "
        "forget the text again"
    )


def test_a_forget_under_way_says_what_it_waits_for() -> None:
    waiting = proto.ForgetProgress(step="prepare", gone=["memoryd"], waited_s=4, bound_s=60)
    assert describe_progress(waiting) == (
        "waiting for memoryd to come back (not running): 4 s of at most 60 s"
    )
    working = proto.ForgetProgress(step="apply", working=["loopd"], waited_s=12)
    assert describe_progress(working) == "loopd still forgetting (12 s)"
