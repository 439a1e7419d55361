"""What a recall answers, and the line it leaves in the recall log.

    [1] session mm-8ass9m…, 2026-09-20 14:02 UTC, the owner said · private
    …the launch window moved to Thursday…
    [2] archive.md, moved 2026-09-24 from memory.md · approved memory · private
    Owner prefers answers in UTC.

Each hit is a source line and a snippet of at most 600 characters centred on the first
match of the query's rarest terms, its whitespace folded to single spaces so that a hit is
always two lines. The result's label is the highest class among the hits, at least
private, and untrusted if any hit is. The recall log records the time, the session, the
query and the source of every hit: what M5c's tiering counts, stable across a reindex.
The owner's recall (`owner_hits`) gets the same hits and snippets, each with its source
whole, for the owner's surface to name and open.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

import entries
from proto import Class, HitSource, Label, RecallHit, RecallRecord, utc_stamp

from .ranking import Found

__all__ = [
    "SNIPPET_CHARS",
    "HitSource",
    "RecallRecord",
    "label_of",
    "owner_hits",
    "recall_record",
    "render",
    "snippet",
]

SNIPPET_CHARS = 600
_ELLIPSIS = "…"
_WORD_SLACK = 40
_SESSION_SHOWN = 9


def label_of(found: Sequence[Found]) -> Label:
    """The highest class among the hits (at least private); untrusted if any hit is."""
    label = Label(class_=Class.private)
    for hit in found:
        label = label.join(_label(hit))
    return label


def _class(value: str) -> Class:
    try:
        return Class(value)
    except ValueError:
        return Class.secret  # a row the index should not hold: take the worst


def _label(hit: Found) -> Label:
    return Label(class_=_class(hit.source.class_), untrusted=hit.source.untrusted)


def source_line(number: int, hit: Found) -> str:
    """`[1] session mm-8ass9m…, 2026-09-20 14:02 UTC, the owner said · private`."""
    source = hit.source
    if source.kind == "archive":
        where = f"archive.md, moved {source.time[:10]} from {source.role} · approved memory"
    else:
        session = source.session
        if len(session) > _SESSION_SHOWN:
            session = session[:_SESSION_SHOWN] + _ELLIPSIS
        where = f"session {session}, {entries.minute(source.time)}, {entries.said_by(source.role)}"
    return f"[{number}] {where} · {_label(hit).describe()}"


def snippet(text: str, terms: Sequence[str], limit: int = SNIPPET_CHARS) -> str:
    """At most `limit` characters of `text`, centred on the first match of one of `terms`.

    The match is found case-insensitively at word boundaries; where FTS5 matched what
    this does not see (a folded diacritic), the snippet starts at the beginning.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    match = _first_match(flat, terms)
    centre = 0 if match is None else (match.start() + match.end()) // 2
    width = limit - 2 * len(_ELLIPSIS)
    lo = max(0, centre - width // 2)
    if lo == 0:
        return _cut_end(flat, limit - len(_ELLIPSIS)) + _ELLIPSIS
    if lo + width >= len(flat):
        return _ELLIPSIS + _cut_start(flat, len(flat) - (limit - len(_ELLIPSIS)))
    return _ELLIPSIS + _cut_end(_cut_start(flat, lo), width) + _ELLIPSIS


def _first_match(text: str, terms: Sequence[str]) -> re.Match[str] | None:
    if not terms:
        return None
    alternatives = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    return re.search(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", text, re.IGNORECASE)


def _cut_end(text: str, width: int) -> str:
    """`text[:width]`, ending at a space when one is near, without trailing spaces."""
    piece = text[:width]
    if width < len(text) and text[width] != " ":
        space = piece.rfind(" ", max(0, width - _WORD_SLACK))
        if space > 0:
            piece = piece[:space]
    return piece.rstrip()


def _cut_start(text: str, lo: int) -> str:
    """`text[lo:]`, starting after a space when one is near, without leading spaces."""
    if lo > 0 and text[lo - 1] != " ":
        space = text.find(" ", lo, lo + _WORD_SLACK)
        if space >= 0:
            lo = space + 1
    return text[lo:].lstrip()


def render(query: str, found: Sequence[Found], terms: Sequence[str] = ()) -> str:
    """The recall answer: numbered hits, or `(no matches for "…")`."""
    if not found:
        return f'(no matches for "{query}")'
    return "\n".join(
        f"{source_line(n, hit)}\n{snippet(hit.text, terms)}" for n, hit in enumerate(found, 1)
    )


def owner_hits(found: Sequence[Found], terms: Sequence[str] = ()) -> list[RecallHit]:
    """The hits as the owner's recall sends them: each source whole, its label, its snippet."""
    return [
        RecallHit(source=hit.source, label=_label(hit), snippet=snippet(hit.text, terms))
        for hit in found
    ]


def recall_record(
    now: datetime, session: str, query: str, k: int, found: Sequence[Found]
) -> RecallRecord:
    """The recall log's line for one recall."""
    return RecallRecord(
        time=utc_stamp(now),
        session=session,
        query=query,
        k=k,
        hits=[hit.source for hit in found],
    )
