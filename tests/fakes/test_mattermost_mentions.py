"""The mention checker against Mattermost's own cases.

The tables come from mattermost/mattermost `server/channels/app/notification_test.go`
(TestGetExplicitMentions, TestGetExplicitMentionsAtHere) and
`server/channels/app/mention_parser_standard_test.go` (TestProcessText); the escape and
character-reference cases follow from `server/public/shared/markdown/inlines.go` and
`inspect.go` (see fakes/mattermost/_inlines.py).
"""

from __future__ import annotations

import pytest
from fakes.mattermost import find_mentions
from hypothesis import given
from hypothesis import strategies as st


def users(message: str, *names: str, keys: tuple[str, ...] = ()) -> set[str]:
    return set(find_mentions(message, names, mention_keys=keys).keywords)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("this is a message for @user", {"@user"}),
        ("this is a message for :@user", {"@user"}),
        ("this is a message for @user.", {"@user"}),
        ("this is a message for -@user", {"@user"}),
        ("this is a message for @user:", {"@user"}),
        ("*@user*", {"@user"}),  # Emphasis
        ("**@user**", {"@user"}),  # StrongEmphasis
        ("~~@user~~", {"@user"}),  # Strikethrough
        ("### @user", {"@user"}),  # Heading
        ("> @user", {"@user"}),  # BlockQuote
        ("hello user.@user", {"@user"}),  # TestProcessText
        ("hello user-@user", {"@user"}),
        ("`this shouldn't mention @user at all`", set()),  # InlineCode
        ("```\nthis shouldn't mention @user at all\n```", set()),  # FencedCodeBlock
        ("    this shouldn't mention @user at all", set()),  # IndentedCodeBlock
        ('[foo](this "shouldn\'t mention @user at all")', set()),  # LinkTitle
        ("`this should mention @user``", {"@user"}),  # MalformedInlineCode
        ("[see @user](http://example.com)", {"@user"}),  # link text is text
    ],
)
def test_the_servers_cases_for_a_user(message: str, expected: set[str]) -> None:
    assert users(message, "user") == expected


def test_a_name_with_periods_and_a_trailing_period() -> None:
    # AtUserWithPeriodAtEndOfSentence, and the potential mentions around it
    assert users("this is a message for @user.period.", "user.period") == {"@user.period"}
    found = find_mentions("this is an message for @potential and @user", ["user"])
    assert found.keywords == {"@user"}
    assert found.potential == ("potential",)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (":smile:", set()),  # Emoji: an emoji name is no keyword
        ("smile", {"smile"}),  # NotEmoji
        (":smile", {"smile"}),  # UnclosedEmoji
        ("smile:", {"smile"}),  # UnopenedEmoji
        ("My name is 萌", {"萌"}),  # MultibyteCharacter
        ("我爱吃番茄炒饭", {"番茄"}),  # MultibyteCharacterInPartOfSentence
    ],
)
def test_mention_keys(message: str, expected: set[str]) -> None:
    assert users(message, keys=("smile", "萌", "番茄")) == expected


# TestGetExplicitMentionsAtHere "Boundary cases": whether @here is mentioned.
AT_HERE = {
    "": False,
    "here": False,
    "@here": True,
    " @here ": True,
    "\n@here\n": True,
    "!@here!": True,
    "#@here#": True,
    "$@here$": True,
    "%@here%": True,
    "^@here^": True,
    "&@here&": True,
    "*@here*": True,
    "(@here(": True,
    ")@here)": True,
    "-@here-": True,
    "_@here_": True,
    "=@here=": True,
    "+@here+": True,
    "[@here[": True,
    "{@here{": True,
    "]@here]": True,
    "}@here}": True,
    "\\@here\\": True,
    "|@here|": True,
    ";@here;": True,
    "@here:": True,
    ":@here:": False,
    "'@here'": True,
    '"@here"': True,
    ",@here,": True,
    "<@here<": True,
    ".@here.": True,
    ">@here>": True,
    "/@here/": True,
    "?@here?": True,
    "`@here`": False,
    "~@here~": True,
    "@HERE": True,
    "@hERe": True,
}


@pytest.mark.parametrize(("message", "mentioned"), sorted(AT_HERE.items()))
def test_at_here_boundaries(message: str, mentioned: bool) -> None:
    assert find_mentions(message, []).here is mentioned


def test_channel_and_all_flags() -> None:
    assert find_mentions("this is a message for @cHaNNeL", []).channel
    assert find_mentions("this is a message for @all:", []).all
    assert not find_mentions("`@channel`", [])


def test_a_backslash_does_not_stop_a_mention() -> None:
    # inlines.go parseEscapeCharacter: the escaped '@' is a text node that starts right after
    # the backslash, so MergeInlineText joins it to the name again
    assert users("hi \\@owner, done", "owner") == {"@owner"}
    assert find_mentions("\\@here", []).here
    assert find_mentions("\\@channel please", []).channel


def test_a_character_reference_stops_a_mention() -> None:
    # parseCharacterReference: '@' from '&#64;' is a node shorter than its source, so it is
    # not merged with the name after it, and inspect.go visits each node alone
    assert not find_mentions("&#64;owner &#x40;here &commat;channel", ["owner"])


def test_attachments_text_pretext_and_field_values_but_not_titles() -> None:
    props = {
        "attachments": [
            {
                "pretext": "for @here",
                "text": "for @user2",
                "fields": [{"title": "@user1", "value": "@user3"}],
            }
        ]
    }
    found = find_mentions("a message", ["user1", "user2", "user3"], props=props)
    assert found.keywords == {"@user2", "@user3"}
    assert found.here


def test_users_and_truthiness() -> None:
    found = find_mentions("@Owner and @bot", ["owner", "bot", "stranger"])
    assert found.users == {"owner", "bot"}
    assert found
    assert not find_mentions("nothing here", ["owner"])


code_text = st.text(st.characters(blacklist_characters="`\r\n~", blacklist_categories=["Cs"]))


@given(code_text)
def test_nothing_in_a_fenced_block_mentions(text: str) -> None:
    assert not find_mentions(f"```\n@here {text} @owner\n```", ["owner"])


@given(code_text)
def test_nothing_in_a_code_span_mentions(text: str) -> None:
    assert not find_mentions(f"`@here {text} @owner`", ["owner"])


@given(st.text())
def test_any_text_is_checked_without_error(text: str) -> None:
    find_mentions(text, ["owner", "bot"], mention_keys=["key"])
