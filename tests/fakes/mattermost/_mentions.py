"""Who a post mentions, by Mattermost's own rules rather than Markdown's.

A port of `server/channels/app/mention_parser_standard.go` (StandardMentionParser.ProcessText,
checkForMention, isKeywordMultibyte) fed as `getExplicitMentions` feeds it
(`server/channels/app/notification.go`): each text node that `markdown.Inspect` visits in the
message and in the attachments' pretext, text and field values (`getMentionsEnabledFields`).
Code spans and code blocks are no text nodes, so they mention nobody; a backslash before `@`
does not stop a mention (the escaped `@` joins the name again); a character reference such as
`&#64;` does, because it stays a node of its own (see `_inlines.py`).

Keywords are what `getMentionKeywordsInChannel` builds by default: `@username` for each user
(lower case), plus any extra mention keys a test gives (a user's `mention_keys`, which default to
none in `model/user.go` SetDefaultNotifications). `@here`, `@channel` and `@all` set their flags
whatever the keywords are, as checkForMention does.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._inlines import text_nodes

_SYSTEM = frozenset({"@here", "@channel", "@all"})


@dataclass(frozen=True)
class Mentions:
    """What one post mentions."""

    keywords: frozenset[str]
    """The keywords matched: `@username`s and extra mention keys, lower case."""
    here: bool = False
    channel: bool = False
    all: bool = False
    potential: tuple[str, ...] = ()
    """Words like `@someone` that name no known user (the server warns the poster about them)."""

    @property
    def users(self) -> frozenset[str]:
        """The usernames mentioned with `@username`."""
        return frozenset(k[1:] for k in self.keywords if k.startswith("@"))

    def __bool__(self) -> bool:
        """True if anyone would be notified: a user, or the channel."""
        return bool(self.keywords) or self.here or self.channel or self.all


def _splits(c: str) -> bool:
    """The separator of ProcessText's FieldsFunc: anything not in a mention or emoji name."""
    if c in ":.-_@":
        return False
    return not unicodedata.category(c).startswith(("L", "N"))


def _fields(text: str, split: Any) -> list[str]:
    """Go's strings.FieldsFunc."""
    words: list[str] = []
    current: list[str] = []
    for c in text:
        if split(c):
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(c)
    if current:
        words.append("".join(current))
    return words


class _Parser:
    """StandardMentionParser: keyword → the ids it names."""

    def __init__(self, keywords: Mapping[str, str]) -> None:
        self.keywords = keywords
        self.multibyte = [k for k in keywords if len(k.encode()) != len(k)]
        self.found: set[str] = set()
        self.flags = {"@here": False, "@channel": False, "@all": False}
        self.potential: list[str] = []

    def check(self, word: str) -> bool:
        """checkForMention."""
        lower = word.lower()
        if lower in self.flags:
            self.flags[lower] = True
        for candidate in (lower, word):
            if candidate in self.keywords:
                self.found.add(self.keywords[candidate])
                return True
        return False

    def process(self, text: str) -> None:
        """ProcessText."""
        for word in _fields(text, _splits):
            if word[0] == ":" and word[-1] == ":":
                continue  # ':word:' is taken for an emoji
            word = word.lstrip(":.-_")
            if self.check(word):
                continue
            stripped = word
            found = False
            while stripped and stripped[-1] in ".-:_":
                stripped = stripped[:-1]
                if self.check(stripped):
                    found = True
                    break
            if found:
                continue
            if word not in _SYSTEM and word.startswith("@"):
                if word[-1] in ".-:":
                    word = word[:-1]
                self.potential.append(word[1:])
            elif any(c in word for c in ".-:"):
                for part in _fields(word, lambda c: c in ".-:"):
                    if self.check(part):
                        continue
                    if part not in _SYSTEM and part.startswith("@"):
                        self.potential.append(part[1:])
            if len(word.encode()) != len(word):
                for key in self.multibyte:
                    if key in word:
                        self.found.add(self.keywords[key])


def mention_fields(message: str, props: Mapping[str, Any] | None = None) -> list[str]:
    """getMentionsEnabledFields: the message, then each attachment's pretext, text, field values."""
    fields = [message]
    attachments = (props or {}).get("attachments")
    for attachment in attachments if isinstance(attachments, list) else []:
        if not isinstance(attachment, dict):
            continue
        for key in ("pretext", "text"):
            if isinstance(attachment.get(key), str) and attachment[key]:
                fields.append(attachment[key])
        for f in attachment.get("fields") or []:
            if isinstance(f, dict) and isinstance(f.get("value"), str) and f["value"]:
                fields.append(f["value"])
    return fields


def find_mentions(
    message: str,
    usernames: Iterable[str],
    *,
    props: Mapping[str, Any] | None = None,
    mention_keys: Iterable[str] = (),
) -> Mentions:
    """The mentions in a post, `@username` keywords for `usernames`, and extra `mention_keys`."""
    keywords = {f"@{u.lower()}": f"@{u.lower()}" for u in usernames}
    keywords.update({k.lower(): k.lower() for k in mention_keys})
    parser = _Parser(keywords)
    for field in mention_fields(message, props):
        for text in text_nodes(field):
            if text:
                parser.process(text)
    return Mentions(
        keywords=frozenset(parser.found),
        here=parser.flags["@here"],
        channel=parser.flags["@channel"],
        all=parser.flags["@all"],
        potential=tuple(parser.potential),
    )
