"""What the bridge posts and how it reads yes and no (properties and examples)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from mattermostd._answers import (
    OwnerAnswer,
    OwnerApproves,
    OwnerDenies,
    bare_decision,
    decision_code,
    parse_decision,
)
from mattermostd._text import (
    APPROVAL_POST_CHARS,
    MAX_POST_CHARS,
    OUTCOME_CHARS,
    Reply,
    approval_card,
    approval_message,
    approval_posts,
    card_text,
    outcome_span,
    split_message,
)
from proto import Label, PendingApproval, ToolCall, ToolResult

ANY_TEXT = st.text(
    st.characters(exclude_categories=()) | st.sampled_from(list("`@\\*_[]<>&!:#\n ~")),
    max_size=80,
)


def approval(arguments: str, *, untrusted: bool = False) -> PendingApproval:
    return PendingApproval(
        id="ap-k3f9xy",
        session="mm-" + "a" * 26,
        call_id="call_1",
        tool="memory",
        arguments=arguments,
        taint=Label(untrusted=untrusted),
        time="2026-12-01T10:00:00Z",
    )


def fenced_body(message: str) -> str:
    """The text inside the approval post's one fenced code block, as the owner sees it."""
    match = re.search(r"^(`{3,})json\n(.*)\n\1$", message, re.MULTILINE | re.DOTALL)
    assert match is not None, message
    return match.group(2)


@settings(max_examples=300)
@given(ANY_TEXT)
def test_the_approval_shows_the_exact_arguments_in_a_block_nothing_closes(text: str) -> None:
    message = approval_message(approval(text))
    body = fenced_body(message)
    assert proto.from_terminal(body) == text
    fence = re.search(r"^(`{3,})json$", message, re.MULTILINE)
    assert fence is not None
    assert fence.group(1) not in body  # no run of backticks in it is as long as the fence


LONG_TEXT = st.tuples(ANY_TEXT, st.integers(1, 600)).map(lambda t: t[0] * t[1])
"""Up to 48,000 characters, often runs of backslashes, backticks or invisible ones."""


@settings(max_examples=150, deadline=None)
@given(LONG_TEXT, st.booleans())
def test_arguments_too_long_for_one_post_are_split_into_parts_that_join_exactly(
    text: str, again: bool
) -> None:
    posts = approval_posts(approval(text, untrusted=True), again=again)
    head, parts = posts[0], posts[1:]
    assert len(head) <= APPROVAL_POST_CHARS  # room for the decision and the outcome
    assert all(len(post) <= MAX_POST_CHARS for post in posts)
    assert "untrusted content" in head
    if not parts:
        assert head == approval_message(approval(text, untrusted=True), again=again)
        return
    assert f"they follow in {len(parts)} posts" in head
    assert proto.from_terminal("".join(fenced_body(part) for part in parts)) == text


def test_an_approval_that_fits_is_one_post() -> None:
    assert approval_posts(approval("{}")) == [approval_message(approval("{}"))]


@given(ANY_TEXT, st.integers(1, 400))
def test_an_outcome_shows_a_reason_or_result_on_one_line_in_bounded_length(
    text: str, times: int
) -> None:
    span = outcome_span(text * times)
    assert "\n" not in span
    assert len(span) <= 12 * OUTCOME_CHARS  # each character at most a `\u{…}` code


def test_the_taint_warning_is_there_only_for_an_untrusted_session() -> None:
    assert "untrusted content" in approval_message(approval("{}", untrusted=True))
    assert "untrusted content" not in approval_message(approval("{}"))


def test_a_restart_reannounces_with_a_head_line() -> None:
    assert approval_message(approval("{}"), again=True).startswith("**Still waiting")


@pytest.mark.parametrize(
    ("message", "decision"),
    [
        ("yes 4uy", OwnerApproves()),
        ("  Yes 4UY ", OwnerApproves()),
        ("y 4uy", OwnerApproves()),
        ("YES 4uy!", OwnerApproves()),
        ("approve 4uy", OwnerApproves()),
        ("no 4uy", OwnerDenies()),
        ("No 4uy.", OwnerDenies()),
        ("n 4uy", OwnerDenies()),
        ("no 4uy because it is wrong", OwnerDenies("because it is wrong")),
        ("no 4uy: say it shorter", OwnerDenies("say it shorter")),
        ("deny 4uy, not now", OwnerDenies("not now")),
        ("yes", None),  # no code: a plugin's canned reply in the owner's name could say it
        ("yes 4uz", None),
        ("no because it is wrong", None),
        ("yes 4uy, but change the wording", None),
        ("yesterday I went out", None),
        ("nothing to say", None),
        ("know what", None),
        ("", None),
        ("maybe", None),
    ],
)
def test_yes_and_no_are_read_strictly_with_the_cards_code(
    message: str, decision: OwnerAnswer | None
) -> None:
    assert parse_decision(message, "4uy") == decision


@pytest.mark.parametrize(
    ("message", "bare"),
    [
        ("yes", True),
        ("y", True),
        ("yes 4uz", True),
        ("no", True),
        ("no because it is wrong", True),
        ("yes, but change the wording", False),
        ("yesterday", False),
        ("tell me more", False),
    ],
)
def test_a_yes_or_no_without_the_code_is_told_how(message: str, bare: bool) -> None:
    assert bare_decision(message) == bare


@given(st.text(max_size=40), st.sampled_from(["4uy", "abc", "x9z"]))
def test_a_decision_is_only_ever_read_from_a_leading_yes_or_no_and_the_code(
    text: str, code: str
) -> None:
    decision = parse_decision(text, code)
    if decision is not None:
        first, second = ([*re.split(r"[\s:,.!-]+", text.strip(), maxsplit=2), "", ""])[:2]
        assert first.lower() in {"yes", "y", "approve", "no", "n", "deny"}
        assert second.lower() == code
        assert isinstance(decision, OwnerApproves) == (first.lower() in {"yes", "y", "approve"})


def test_the_code_is_on_the_card_and_in_its_frame() -> None:
    pending = approval("{}")
    text = approval_message(pending)
    code = decision_code(pending.id)
    assert f"**yes {code}**" in text
    card = approval_card(text, "#ffbc1f")
    assert card_text({"attachments": [card]}) == text
    assert "Only a card in this frame" in str(card["footer"])


@settings(max_examples=200)
@given(st.lists(ANY_TEXT, min_size=1, max_size=5), ANY_TEXT, ANY_TEXT)
def test_a_reply_never_mentions_or_loads_an_image(pieces: list[str], name: str, args: str) -> None:
    reply = Reply()
    for piece in pieces:
        reply.text(piece)
    reply.called(ToolCall(id="c1", name=name, arguments=args))
    reply.result(
        ToolResult(
            call=ToolCall(id="c1", name=name, arguments=args),
            status="error",
            content=f"error: {args}",
            label=Label(untrusted=True),
        )
    )
    message = reply.message()
    outside_code = re.sub(r"(`+).*?\1", "", message)  # the bridge's spans are one line each
    assert "@" not in outside_code
    assert "![" not in outside_code


def test_a_reply_shows_each_call_on_one_line_with_its_outcome() -> None:
    reply = Reply()
    reply.text("Let me look.")
    call = ToolCall(id="c1", name="recall", arguments='{"query": "tea"}')
    reply.called(call)
    reply.result(ToolResult(call=call, status="ok", content="[1] …", label=Label()))
    reply.text("You like green tea.")
    reply.finish("You like green tea.")
    assert reply.message() == (
        'Let me look.\n\ntool `recall` `{"query": "tea"}` → ok\n\nYou like green tea.'
    )


def test_an_error_shows_once_not_twice() -> None:
    reply = Reply()
    call = ToolCall(id="c1", name="memory", arguments="{}")
    reply.called(call)
    reply.result(ToolResult(call=call, status="denied", content="denied: no", label=Label()))
    assert "denied: `no`" in reply.message()
    assert "denied: denied" not in reply.message()


def test_a_final_text_the_stream_did_not_bring_is_added() -> None:
    reply = Reply()
    reply.finish("Hello.")
    assert reply.message() == "Hello."


@given(st.text(st.sampled_from("ab \n"), max_size=3000), st.integers(20, 500))
def test_a_long_message_is_split_without_losing_a_character(text: str, limit: int) -> None:
    parts = split_message(text, limit)
    assert all(len(part) <= limit for part in parts)
    # only the line ends a cut was made at are dropped
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")


def test_the_post_limit_is_under_mattermosts() -> None:
    assert MAX_POST_CHARS < 16_383
