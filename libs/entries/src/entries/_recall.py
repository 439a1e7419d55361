"""Recall hits in words: who said it and when, for the model's answer and the owner's.

The model's answer (memoryd) and the owner's (`recall_answer`, bxctl's `recall`) share
the words for a hit's role and minute. The owner's answer names each hit whole, with
the command that opens it, four lines a hit:

    [1] session chat-k6m5ert76psohrmw5uwb2ibpb4, 2026-09-20 14:02 UTC
        the owner said · private
        FYI the launch window moved to Thursday.
        open: bxctl sessions show chat-k6m5ert76psohrmw5uwb2ibpb4 --at 12

A session's record is addressed as the index gives it (`proto.HitSource`): the log's
epoch and the record's place in that log, counted from 0. `at_text` writes it as `12`
in epoch 0 (every session loopd writes today) and `2:12` in a later epoch;
`parse_at` reads both back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from proto import HitSource, RecallHit

from ._answer import Answer, Block, Line, Quote, line

__all__ = [
    "ARCHIVE_PART_CHARS",
    "archive_part",
    "at_text",
    "minute",
    "parse_at",
    "recall_answer",
    "said_by",
]

_WHO = {
    "user": "the owner said",
    "assistant": "the assistant said",
    "tool_call": "the assistant called",
}
_RECORD_TIME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2})")
_AT = re.compile(r"(?:([0-9]{1,9}):)?([0-9]{1,9})")

ARCHIVE_PART_CHARS = 60
"""At most this much of an archive entry names it in the command that opens it."""


def said_by(role: str) -> str:
    """`the owner said`, `the assistant said`, `the assistant called`; else the role."""
    return _WHO.get(role, role)


def minute(time: str) -> str:
    """`2026-09-20T14:02:11Z` as `2026-09-20 14:02 UTC`; a time of another form as it is."""
    when = _RECORD_TIME.match(time)
    return f"{when[1]} {when[2]} UTC" if when else time


def at_text(source: HitSource) -> str:
    """A session hit's record as `--at` takes it: `12`, or `2:12` in epoch 2."""
    if source.epoch:
        return f"{source.epoch}:{source.record}"
    return str(source.record)


def parse_at(text: str) -> tuple[int, int]:
    """`RECORD` or `EPOCH:RECORD` (decimal, at most 9 digits each) as (epoch, record).

    Raises:
        ValueError: `text` is neither; the message says what is expected.
    """
    match = _AT.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            "a record is its number as `bxctl recall` prints it: RECORD (such as 12) or "
            "EPOCH:RECORD (such as 1:12), counted from 0"
        )
    epoch, record = match.groups()
    return int(epoch or 0), int(record)


def archive_part(snippet: str, limit: int = ARCHIVE_PART_CHARS) -> str:
    """The start of an archive hit's snippet, whole words, to name its entry by.

    A snippet cut at its start (`…`) loses its first, maybe partial, word.
    """
    text = snippet.removesuffix("…")
    if text.startswith("…"):
        text = text[1:].partition(" ")[2] or text[1:]
    if len(text) <= limit:
        return text.strip()
    cut = text[: limit + 1].rfind(" ")
    return (text[:cut] if cut > 0 else text[:limit]).strip()


def _where(number: int, source: HitSource) -> Line:
    # Every field of a source is memoryd's word, not ours: quoted (revealed on a terminal).
    if source.kind == "archive":
        return line(
            f"[{number}] archive.md, moved ",
            Quote(source.time[:10]),
            " from ",
            Quote(source.role),
        )
    return line(f"[{number}] session ", Quote(source.session), ", ", Quote(minute(source.time)))


def _what(hit: RecallHit) -> Line:
    if hit.source.kind == "archive":
        return line(f"approved memory · {hit.label.describe()}", depth=2)
    return line(Quote(said_by(hit.source.role)), f" · {hit.label.describe()}", depth=2)


def recall_answer(
    query: str, hits: Sequence[RecallHit], opener: Callable[[RecallHit], str]
) -> Answer:
    """The owner's recall, or that nothing matched.

    Per hit: where it is; who said it and its label; the snippet; and `open:`
    with the command `opener` gives for it.
    """
    if not hits:
        return Answer((line("no matches for ", Quote(query)),))
    parts: list[Line | Block] = []
    for number, hit in enumerate(hits, 1):
        if number > 1:
            parts.append(line())
        parts += [
            _where(number, hit.source),
            _what(hit),
            Block(hit.snippet, depth=1),  # whole: the terminal wraps it, nothing is refolded
            line("open: ", Quote(opener(hit)), depth=2),
        ]
    return Answer(tuple(parts))
