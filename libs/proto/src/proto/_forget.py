r"""Forget's one rule: what holds a text, and how it is taken out of a string, a value, a line.

A text holds a needle when, both folded, the one is inside the other. Folding drops every
default-ignorable (invisible) code point and applies Unicode's full case folding, so
`55\u200b12` holds "5512", "Hauptstraße" holds "STRASSE" and "ΣΊΣΥΦΟΣ" holds "σίσυφος".
Every store of every role, its after-check and the owner's `find` judge by `holds`, and
only by it: a second rule would find a copy the first one misses.

A JSON value is judged by its decoded strings, and a string that is itself JSON (a tool
call's arguments) by what it decodes to and as it is written (`holds_text`), so an
escaped copy is found as surely as a plain one. Each occurrence becomes `MARKER`; the
rest of the string stays, so a file keeps its shape.

A line of a role's JSON-lines file is redacted as its record kind says (`redact_line`):
every string is text except the fields the kind names in `KEPT` (ids, times, names, tags),
so a text field added to a record is redacted without anyone remembering to list it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi

from ._ignorable import DEFAULT_IGNORABLE, is_default_ignorable

__all__ = [
    "FORGET_MAX_CHARS",
    "FORGET_MIN_CHARS",
    "MARKER",
    "digest",
    "fold",
    "forget_problem",
    "holds",
    "holds_text",
    "holds_value",
    "is_near",
    "may_hold",
    "redact",
    "redact_line",
    "redact_record",
    "redact_text",
    "redact_value",
    "words",
]

MARKER = "[forgotten]"
"""What each occurrence of a forgotten text becomes."""

FORGET_MIN_CHARS = 2
FORGET_MAX_CHARS = 1000
"""A text to forget is 2 to 1000 characters once stripped: one character would wreck
every file, and a longer one is an entry, named by a part of it."""

_WORD = re.compile(r"\w+")


def forget_problem(text: str) -> str | None:
    """Why `text` cannot be forgotten as given, as a sentence; None when it can."""
    stripped = text.strip()
    if len(_INVISIBLE.sub("", stripped)) < FORGET_MIN_CHARS:  # what the owner sees
        return f"say what to forget: at least {FORGET_MIN_CHARS} characters"
    if len(stripped) > FORGET_MAX_CHARS:
        return (
            f"that is {len(stripped)} characters; name what to forget in at most "
            f"{FORGET_MAX_CHARS} (a part of an entry is enough)"
        )
    if any(unicodedata.category(c) == "Cc" for c in stripped):
        return "what to forget cannot hold control characters (a newline, a tab, an escape)"
    return None


_INVISIBLE = re.compile(
    "[" + "".join(f"\\U{start:08x}-\\U{end:08x}" for start, end in DEFAULT_IGNORABLE) + "]"
)


def fold(text: str) -> str:
    r"""`text` as `holds` compares it: invisible code points dropped, case folded (full).

    The owner reads "55\u200b12" as 5512: a copy they cannot see must not escape a forget.
    """
    if text.isascii():
        return text.lower()  # no invisible code point is ASCII; ASCII folds as it lowers
    return _INVISIBLE.sub("", text).casefold()


def holds(text: str, needle: str) -> bool:
    """Whether `text` holds `needle`, both folded (`fold`): the one rule of every forget."""
    return fold(needle) in fold(text)


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    """The non-overlapping spans of `text` whose folded form is the folded `needle`.

    Folding can change a character's length (`ß` folds to two), so the search runs on
    the folded text and each match is mapped back to the characters it came from.
    """
    folded_needle = fold(needle)
    starts: list[int] = []  # starts[k]: index in `text` of the k-th folded character
    pieces: list[str] = []
    for i, c in enumerate(text):
        folded = "" if is_default_ignorable(c) else c.casefold()
        starts.extend([i] * len(folded))
        pieces.append(folded)
    folded_text = "".join(pieces)
    spans: list[tuple[int, int]] = []
    at = folded_text.find(folded_needle)
    while at >= 0:
        end = at + len(folded_needle)
        spans.append((starts[at], starts[end - 1] + 1))
        at = folded_text.find(folded_needle, end)
    return spans


def _replace(text: str, needle: str, by: str) -> str:
    out: list[str] = []
    last = 0
    for start, end in _spans(text, needle):
        if start < last:  # two matches mapped onto one character
            start = last
        out.append(text[last:start])
        out.append(by)
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text: str, needle: str) -> str:
    """`text` with every occurrence of `needle` (as `holds` finds it) replaced by `MARKER`.

    The result never holds `needle`: where the marker itself, or the marker beside what
    is left, would make it again (a needle such as `forgot` or `]]`), occurrences are
    cut out instead, until none is left.
    """
    if not holds(text, needle):
        return text
    result = _replace(text, needle, MARKER)
    while holds(result, needle):
        result = _replace(result, needle, "")
    return result


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def holds_value(value: Any, needle: str, *, data: bool = False) -> bool:
    """Whether any string in a decoded JSON value holds `needle`.

    Keys count, and a string that is itself JSON (an object or an array) is decoded in
    turn and judged by what it decodes to, not by its escapes. Inside such a string
    (`data`: a tool call's arguments) numbers count too, written as JSON writes them: an
    argument `{"code": 7731}` holds "7731". A record's own numbers (counts, positions) are
    its shape, not what anyone said.
    """
    if isinstance(value, str):
        inner = _json_inside(value)
        return holds(value, needle) if inner is None else holds_value(inner, needle, data=True)
    if isinstance(value, dict):
        return any(holds(k, needle) or holds_value(v, needle, data=data) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_value(v, needle, data=data) for v in value)
    if data and _number(value):
        return holds(msgspec.json.encode(value).decode(), needle)
    return False


def redact_value(value: Any, needle: str, *, data: bool = False) -> Any:
    """A decoded JSON value with `needle` taken out of every string in it.

    A string that is JSON (an object or an array) is redacted inside and encoded again,
    so it stays JSON; any other string is redacted as text. Keys are redacted too.
    """
    if isinstance(value, str):
        inner = _json_inside(value)
        if inner is None:
            return redact(value, needle)
        if not holds_value(inner, needle, data=True):
            return value
        return msgspec.json.encode(redact_value(inner, needle, data=True)).decode()
    if isinstance(value, dict):
        return {redact(k, needle): redact_value(v, needle, data=data) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, needle, data=data) for v in value]
    if data and _number(value) and holds_value(value, needle, data=True):
        return redact(msgspec.json.encode(value).decode(), needle)  # a number said: text now
    return value


def holds_text(text: str, needle: str) -> bool:
    """Whether a string holds `needle` as it is written, or, when it is JSON, decoded."""
    return holds(text, needle) or holds_value(text, needle)


def redact_text(text: str, needle: str) -> str:
    """`text` with `needle` out of it, judged decoded (JSON inside stays JSON) and as written.

    A JSON string judged by what it decodes to can still hold the needle in its escapes
    (a needle with a quote or a backslash), and the model is sent the string as written.
    """
    redacted = redact_value(text, needle)
    assert isinstance(redacted, str)
    return redact(redacted, needle) if holds(redacted, needle) else redacted


def _json_inside(text: str) -> Any | None:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        inner = msgspec.json.decode(text)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    return inner if isinstance(inner, (dict, list)) else None


_ESCAPED = frozenset('"\\/')
"""What a JSON escape other than `\\u` can stand for, besides control characters."""


def may_hold(data: bytes, needle: str) -> bool:
    r"""False when JSON bytes (a line, a whole file) cannot hold `needle` once decoded.

    The quick test that lets a forget skip most of a large home. Without a `\u` escape,
    the only escapes stand for a quote, a backslash, a slash or a control character; a
    needle holding none of those can only be decoded from the same characters written
    plainly, so the raw text must hold it. Nested JSON (a tool call's arguments) escapes
    its escapes, and is judged the same way. Anything else may hold it, and is decoded.
    """
    if b"\\u" in data or any(c in _ESCAPED or unicodedata.category(c) == "Cc" for c in needle):
        return True
    return holds(data.decode("utf-8", errors="replace"), needle)


# -- records ---------------------------------------------------------------------------

R = TypeVar("R", bound=msgspec.Struct)
_kinds: dict[Any, mi.Type] = {}


def _info(kind: Any) -> mi.Type:
    found = _kinds.get(kind)
    if found is None:
        found = _kinds[kind] = mi.type_info(kind)
    return found


def _as(value: Any, kind: mi.Type, needle: str) -> Any:
    """`value` (decoded JSON of `kind`) with `needle` out of its text; `KEPT` fields stay."""
    match kind:
        case mi.StrType():
            return redact_text(value, needle) if isinstance(value, str) else value
        case mi.StructType(cls=cls, fields=fields, tag_field=tag_field):
            if not isinstance(value, dict):
                return value
            kept: frozenset[str] = getattr(cls, "KEPT", frozenset())
            named = {f.encode_name: f for f in fields}
            out: dict[str, Any] = {}
            for key, item in value.items():
                field = named.get(key)
                if key == tag_field or (field is not None and field.name in kept):
                    out[key] = item
                elif field is None:
                    out[key] = redact_value(item, needle)  # a field of a newer kind: text
                else:
                    out[key] = _as(item, field.type, needle)
            return out
        case mi.ListType(item_type=item) | mi.VarTupleType(item_type=item):
            return [_as(v, item, needle) for v in value] if isinstance(value, list) else value
        case mi.DictType(value_type=item):
            if not isinstance(value, dict):
                return value
            return {k: _as(v, item, needle) for k, v in value.items()}
        case mi.UnionType(types=types):
            return _as(value, _member(value, types), needle)
        case mi.AnyType():
            return redact_value(value, needle)
        case _:
            return value  # numbers, booleans, literals, enums, None: a record's shape


_JSON_OF: dict[type, type] = {str: mi.StrType, list: mi.ListType, dict: mi.DictType}


def _member(value: Any, types: tuple[mi.Type, ...]) -> mi.Type:
    """The member of a union that `value` (decoded JSON) is."""
    for member in types:
        if isinstance(member, mi.StructType):
            tag = member.tag_field
            if isinstance(value, dict) and (tag is None or value.get(tag) == member.tag):
                return member
        elif isinstance(member, _JSON_OF.get(type(value), mi.NoneType)):
            return member
    return mi.AnyType() if isinstance(value, str | dict | list) else mi.NoneType()


def redact_line(line: bytes, needle: str, kinds: Sequence[object] = ()) -> bytes | None:
    """One line of a JSON-lines file with `needle` out of it; None if it does not hold it.

    A line that is one of the record `kinds` (tried in order) is redacted in its text
    alone: every string but the fields the kind names in its `KEPT` (ids, times, names),
    and its tag, stay as they are. Any other JSON is redacted value by value, keys too; a
    line that is not JSON (torn by a crash, damaged) is redacted as text, so damage never
    hides a copy.
    """
    if not may_hold(line, needle):
        return None
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        text = line.decode("utf-8", errors="replace")
        return redact(text, needle).encode() if holds(text, needle) else None
    redacted: Any = None
    for kind in kinds:
        try:
            msgspec.convert(value, kind)
        except msgspec.ValidationError:
            continue
        redacted = _as(value, _info(kind), needle)
        break
    else:
        if not holds_value(value, needle):
            return None
        redacted = redact_value(value, needle)
    return None if redacted == value else msgspec.json.encode(redacted)


def redact_record(record: R, needle: str) -> R | None:
    """A record (a Struct) with `needle` out of its text; None when its text does not hold it.

    Its text is what `redact_line` redacts in a line of its kind.
    """
    kind = type(record)
    value = msgspec.to_builtins(record)
    redacted = _as(value, _info(kind), needle)
    return None if redacted == value else msgspec.convert(redacted, kind)


def words(needle: str) -> list[str]:
    """The words of a text to forget, folded, in order, each once."""
    seen: list[str] = []
    for word in _WORD.findall(fold(needle)):
        if word not in seen:
            seen.append(word)
    return seen


def is_near(text: str, needle: str) -> bool:
    """A near match: `text` holds every word of `needle` (folded) but not `needle`.

    A preview offers these, so the owner can forget that wording too.
    """
    if holds(text, needle):
        return False
    needle_words = words(needle)
    if not needle_words:
        return False
    have = set(_WORD.findall(fold(text)))
    return all(w in have for w in needle_words)


def digest(key: bytes, needle: str) -> str:
    """A keyed digest of a forgotten text (its folded form).

    What a record may keep to say "this was forgotten" without keeping it, and without
    letting a reader of the file test guesses of a short secret.
    """
    import hmac

    return hmac.new(key, b"forget\x00" + fold(needle).encode(), hashlib.sha256).hexdigest()
