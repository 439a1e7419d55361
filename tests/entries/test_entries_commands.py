"""The owner's commands' one grammar, the same with `/` (the chat) and `!` (Mattermost)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import entries
import proto
from entries import (
    COMMANDS,
    ForModel,
    Help,
    NotACommand,
    Parsed,
    Remember,
    Remove,
    ShowMemory,
    Sigil,
    Undo,
    Usage,
    Why,
    help_rows,
    parse_command,
)

SIGILS: list[Sigil] = ["/", "!"]


@pytest.mark.parametrize("sigil", SIGILS)
@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("hello", ForModel("hello")),
        ("  {s}remember likes tea  ", Remember("likes tea", "memory")),
        ("{s}Remember likes tea", Remember("likes tea", "memory")),
        ("{s}REMEMBER --user likes tea", Remember("likes tea", "user")),
        ("{s}remember --memory likes tea", Remember("likes tea", "memory")),
        ("{s}remember -- --yes is a flag", Remember("--yes is a flag", "memory")),
        ("{s}remember a\nsecond line", Remember("a\nsecond line", "memory")),
        ("{s}remove tea", Remove("tea")),
        ("{s}remove --user tea", Remove("tea", "user")),
        ("{s}remove --yes --memory tea", Remove("tea", "memory", confirmed=True)),
        ("{s}why tea time", Why("tea time")),
        ("{s}undo", Undo()),
        ("{s}undo ed-abc234", Undo("ed-abc234")),
        ("{s}undo ed-abc234 --yes", Undo("ed-abc234", confirmed=True)),
        ("{s}undo --yes", Undo(None, confirmed=True)),
        ("{s}memory", ShowMemory()),
        ("{s}help", Help()),
        ("{s}help me", Help()),
        ("{s}etc/passwd is what?", NotACommand("etc/passwd")),
        ("{s}Important: the meeting moved", NotACommand("Important:")),
        ("{s}rememberx tea", NotACommand("rememberx")),
        ("{s}{s}remember tea", ForModel("{s}remember tea")),
        ("a {s}remember in the middle", ForModel("a {s}remember in the middle")),
        ("{s}", ForModel("{s}")),
        ("{s}5 stars", ForModel("{s}5 stars")),
    ],
)
def test_a_line_means_the_same_with_either_sigil(sigil: Sigil, line: str, parsed: Parsed) -> None:
    written = line.replace("{s}", sigil)
    if isinstance(parsed, ForModel):
        parsed = ForModel(parsed.text.replace("{s}", sigil))
    assert parse_command(written, sigil) == parsed


@pytest.mark.parametrize("sigil", SIGILS)
@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{s}remember", "say what to remember"),
        ("{s}remember --user", "say what to remember"),
        ("{s}remember --yes tea", "takes `--memory` and `--user`, not `--yes`"),
        ("{s}remove --user --memory tea", "one of --user and --memory, not both"),
        ("{s}remove", "say which entry"),
        ("{s}why", "say which entry"),
        ("{s}why --user tea", "takes no options, not `--user`"),
        ("{s}undo ed-abc123", "takes an edit id like"),  # 1 is not base32
        ("{s}undo yesterday", "takes an edit id like"),
        ("{s}memory now", "`{s}memory` takes nothing after it"),
    ],
)
def test_a_command_that_cannot_run_says_why(sigil: Sigil, line: str, says: str) -> None:
    parsed = parse_command(line.replace("{s}", sigil), sigil)
    assert isinstance(parsed, Usage)
    assert says.replace("{s}", sigil) in parsed.problem


def test_a_part_longer_than_any_entry_can_hold_is_refused_whole_not_cut() -> None:
    parsed = parse_command("/remove " + "x" * (proto.MAX_PART_CHARS + 1), "/")
    assert parsed == Usage("name the entry by at most 2,000 characters of it; that part is 2,001")
    assert parse_command("/why " + "x" * proto.MAX_PART_CHARS, "/") == Why("x" * 2000)


@given(st.text(), st.sampled_from(SIGILS))
def test_any_text_is_a_command_or_a_message_never_an_exception(text: str, sigil: Sigil) -> None:
    parsed = parse_command(text, sigil)
    stripped = text.strip()
    if stripped.startswith(sigil * 2):
        assert parsed == ForModel(stripped[1:])
    elif (
        not stripped.startswith(sigil) or not stripped[1:2].isascii() or not stripped[1:2].isalpha()
    ):
        assert parsed == ForModel(text)
    else:
        assert not isinstance(parsed, ForModel)


@given(
    st.sampled_from(["remember", "remove", "why"]),
    st.lists(st.sampled_from(["--user", "--memory", "--yes"]), max_size=2, unique=True),
    st.text(min_size=1).filter(lambda t: t.strip() and not t.strip().startswith("-")),
)
def test_both_surfaces_read_a_command_alike(word: str, options: list[str], rest: str) -> None:
    line = " ".join([word, *options, rest])
    chat, post = parse_command("/" + line, "/"), parse_command("!" + line, "!")
    if isinstance(chat, Usage) and isinstance(post, Usage):
        assert chat.problem.replace("/", "!") == post.problem.replace("/", "!")
    else:
        assert chat == post
    if isinstance(chat, Remember | Remove | Why):
        text = chat.text if isinstance(chat, Remember) else chat.part
        assert text == rest.strip()


def test_the_help_lists_every_command_with_either_sigil() -> None:
    for sigil in SIGILS:
        rows = help_rows(sigil)
        assert [u for u, _ in rows[:-1]] == [sigil + c.usage for c in COMMANDS]
        assert rows[-1] == (f"{sigil}{sigil}TEXT", f"send {sigil}TEXT to boxmaker as it is")
        for usage, _ in rows[:-1]:
            parsed = parse_command(
                usage.replace("TEXT", "tea").replace("PART", "tea").replace("[EDIT]", "ed-abcdef"),
                sigil,
            )
            assert not isinstance(parsed, ForModel | NotACommand | Usage), usage
    words = {c.usage.split()[0] for c in COMMANDS}
    assert words == {"remember", "remove", "forget", "why", "undo", "memory", "help"}
    assert "undo [EDIT]" in entries.to_plain(entries.Answer((entries.Table(tuple(rows)),)))
