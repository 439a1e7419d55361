"""No post the bridge makes can mention anyone, by Mattermost's own rules (the fake's port of
its Markdown and mention parsers), whatever the model, a tool or an entry puts in it."""

from __future__ import annotations

import pytest
from fakes.mattermost import find_mentions
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from mattermostd._text import Reply, approval_message
from proto import Label, PendingApproval, ToolCall, ToolResult

USERS = ("owner", "boxmaker", "stranger", "all", "ada")
# Text built to find a way through: mentions, escapes, entities, code fences and spans.
PIECES = st.sampled_from(
    [
        "@all",
        "@channel",
        "@here",
        "@owner",
        "@ada",
        "\\@ada",
        "&#64;",
        "&",
        "#64;",
        "`",
        "```",
        "~~~",
        "\n",
        " ",
        "\\",
        "<",
        ">",
        "[x](y)",
        "![i](http://e/x)",
        ":",
        ".",
        "-",
        "_",
        "*",
        "a",
        "\u200b",
        "\u202e",
    ]
)
HOSTILE = st.lists(PIECES | st.text(max_size=4), max_size=25).map("".join)


def mentions(message: str) -> object:
    return find_mentions(message, USERS)


@pytest.mark.parametrize("attempt", ["@all", "\\@all", "@ada hi", "`x`@all", "(@here)", "@ada."])
def test_the_checker_finds_the_mentions_we_defend_against(attempt: str) -> None:
    assert mentions(attempt), attempt  # the checker is not blind: raw text does mention


@settings(max_examples=400)
@given(HOSTILE)
def test_no_rendering_mentions_anyone(text: str) -> None:
    for rendered in (
        proto.for_markdown(text),
        proto.for_mattermost(text),
        proto.code_block(text),
        proto.code_span(text),
    ):
        assert not mentions(rendered), (text, rendered)


@settings(max_examples=200)
@given(HOSTILE, HOSTILE, HOSTILE)
def test_no_reply_or_approval_mentions_anyone(text: str, name: str, arguments: str) -> None:
    reply = Reply()
    reply.text(text)
    call = ToolCall(id="c", name=name, arguments=arguments)
    reply.called(call)
    reply.result(ToolResult(call=call, status="error", content=text, label=Label()))
    reply.finish(arguments)
    assert not mentions(reply.message()), reply.message()
    pending = PendingApproval(
        id=name,
        session="mm-" + "a" * 26,
        call_id="call_1",
        tool=name,
        arguments=arguments,
        taint=Label(untrusted=True),
        time="2026-12-01T10:00:00Z",
    )
    for again in (False, True):
        message = approval_message(pending, again=again)
        assert not mentions(message), message
