"""Autolinks, emoji and character references of Mattermost's inline Markdown parser.

Ported from `server/public/shared/markdown`: autolink.go (parseWWWAutolink, parseURLAutolink,
checkDomain, isValidHostCharacter, trimTrailingCharactersFromLink), links.go
(parseImageDimensions) and inlines.go (CharacterReference; named references from the HTML5
list, as html_entities.go has them).
"""

from __future__ import annotations

import html.entities
import re
import unicodedata

from ._text import Range, is_alphanumeric, is_numeric, is_whitespace

_WWW = re.compile(r"www\d{0,3}\.")
_URL_SCHEMES = ("http", "https", "ftp", "mailto", "tel", "gemini")


def character_reference(ref: str) -> str:
    """inlines.go CharacterReference: the text of `&ref;`, or "" if it is none."""
    if not ref:
        return ""
    if ref[0] != "#":
        return html.entities.html5.get(ref + ";", "")
    if len(ref) < 2:
        return ""
    if ref[1] in "xX":
        digits, base, allowed = ref[2:], 16, "0123456789abcdefABCDEF"
    else:
        digits, base, allowed = ref[1:], 10, "0123456789"
    if not 1 <= len(digits) <= 8 or any(c not in allowed for c in digits):
        return ""
    n = int(digits, base)
    if n == 0 or n > 0x10FFFF or 0xD800 <= n <= 0xDFFF:
        return "\ufffd"
    return chr(n)


def _is_valid_host_character(s: str) -> bool:
    """autolink.go isValidHostCharacter: not a space and not punctuation."""
    if not s:
        return False
    cat = unicodedata.category(s[0])
    return not s[0].isspace() and not cat.startswith("P")


def _check_domain(data: str, allow_short: bool) -> int:
    """autolink.go checkDomain."""
    found_period = False
    i = 1
    while i < len(data) - 1:
        if data[i] == "_":
            return 0
        if data[i] == ".":
            found_period = True
        elif not _is_valid_host_character(data[i:]) and data[i] != "-":
            break
        i += 1
    return i if allow_short or found_period else 0


def _trim_link_end(md: str, start: int, end: int) -> int:
    """autolink.go trimTrailingCharactersFromLink."""
    runes = md[start:end]
    link_end = len(runes)
    for i, c in enumerate(runes):
        if c in "<>":
            link_end = i
            break
    opening = runes[:link_end].count("(")
    closing = runes[:link_end].count(")")
    while link_end > 0:
        c = runes[link_end - 1]
        if c in "?!.,:*_~'\"":
            new_end = link_end - 1
        elif c == ";":
            new_end = link_end - 2
            while new_end > 0 and ("a" <= runes[new_end] <= "z" or "A" <= runes[new_end] <= "Z"):
                new_end -= 1
            if not (new_end < link_end - 2 and runes[new_end] == "&"):
                new_end = link_end - 1
        elif c == ")" and closing > opening:
            new_end = link_end - 1
        else:
            break
        dropped = runes[new_end:link_end]
        opening -= dropped.count("(")
        closing -= dropped.count(")")
        link_end = new_end
    return start + link_end


def www_autolink(data: str, position: int) -> Range | None:
    """autolink.go parseWWWAutolink (its `position > 1` is kept as Go has it)."""
    if position > 1:
        prev = data[position - 1]
        if not is_whitespace(prev) and prev not in "*_~)<(>":
            return None
    if len(data) - position < 4 or not _WWW.match(data, position):
        return None
    end = _check_domain(data[position:], allow_short=False)
    if end == 0:
        return None
    end += position
    while end < len(data) and not is_whitespace(data[end]):
        end += 1
    end = _trim_link_end(data, position, end)
    return None if end == position else Range(position, end)


def url_autolink(data: str, position: int) -> Range | None:
    """autolink.go parseURLAutolink, at the colon of `scheme://`."""
    if len(data) - position < 4 or data[position + 1] != "/" or data[position + 2] != "/":
        return None
    start = position - 1
    while start > 0 and is_alphanumeric(data[start - 1]):
        start -= 1
    if start < 0:
        return None
    scheme = data[start:position].lower()
    if scheme not in _URL_SCHEMES or not _is_valid_host_character(data[position + 3 :]):
        return None
    end = _check_domain(data[position + 3 :], allow_short=True)
    if end == 0:
        return None
    end += position
    while end < len(data) and not is_whitespace(data[end]):
        end += 1
    end = _trim_link_end(data, start, end)
    return None if end == start else Range(start, end)


def image_dimensions(raw: str, position: int) -> int | None:
    """links.go parseImageDimensions: the position after `=WxH`, or None."""
    try:
        position += 1
        has_width = has_height = False
        while is_numeric(raw[position]):
            has_width = True
            position += 1
        if is_whitespace(raw[position]) or raw[position] == ")":
            return position
        if raw[position] not in "xX":
            return None
        position += 1
        while is_numeric(raw[position]):
            has_height = True
            position += 1
        if not is_whitespace(raw[position]) and raw[position] != ")":
            return None
    except IndexError:  # Go would panic here; no valid post gets this far
        return None
    return position if has_width or has_height else None
