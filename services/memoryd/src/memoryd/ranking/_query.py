"""The recall query as FTS5 sees it: quoted terms joined by OR, nothing else.

The model's query is split on every character that is not a letter or a digit; each
term is wrapped in double quotes and the terms are joined with ` OR `. A term can hold
no `"` (it is not a letter), so no FTS5 operator, column filter, prefix star or NUL
from the model ever reaches SQLite: whatever the model writes, the MATCH string is a
list of FTS5 strings.

Combining marks stay inside their term, so a word of a script written with vowel signs
(Devanagari, Thai, …) remains one term; FTS5 then tokenizes it into a phrase.
"""

from __future__ import annotations

import unicodedata

__all__ = ["RANKED", "match_string", "query_terms"]

RANKED = "SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH ? ORDER BY bm25(hits) LIMIT ?"
"""The spec's query: a MATCH string and k; rowids and bm25, best first (ties in rowid order)."""


def _is_term_char(char: str) -> bool:
    # Letters and digits (`isalnum`: Unicode categories L* and N*), and combining marks.
    return char.isalnum() or unicodedata.category(char)[0] == "M"


def query_terms(query: str) -> list[str]:
    """The distinct terms of `query`, in order; case-insensitively distinct."""
    terms: list[str] = []
    seen: set[str] = set()
    current: list[str] = []
    for char in query + " ":
        if _is_term_char(char):
            current.append(char)
        elif current:
            term = "".join(current)
            current.clear()
            if term.lower() not in seen:
                seen.add(term.lower())
                terms.append(term)
    return terms


def match_string(terms: list[str]) -> str:
    """`"a" OR "b" OR …` for FTS5's MATCH; an empty list gives the empty string."""
    return " OR ".join(f'"{term}"' for term in terms)
