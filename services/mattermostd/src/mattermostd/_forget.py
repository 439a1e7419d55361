"""The bridge's part of a forget: its own files, and its own posts in Mattermost.

The state file holds what owners and the model said while it is under way: the text of
posts in flight, the approvals' messages, arguments and the owner's versions, the
changes shown and waiting for a yes. A forget redacts the text fields only, as each
record's kind says (`proto.redact_record`: ids stay ids, whatever the text); a waiting
change that holds the text is dropped rather than redacted, since a yes would then apply
a change nobody was shown. The damaged copies set aside beside the state file are redacted
as JSON when they decode as JSON, and deleted when they do not (their escapes cannot be
trusted to show every copy).

After the roles' forget, the bridge reads the channels it knows, newest first and a
bounded number of pages, and edits its own posts that hold the text (the message, and
an approval card's attachments). The owner's own posts it cannot change: it lists them,
with links.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

import proto

from ._api import Post
from ._state import Inflight, OpenApproval, State

__all__ = [
    "CARD_PROPS",
    "STORE",
    "RedactedPost",
    "damaged_holding",
    "holding",
    "merged",
    "permalink",
    "post_holds",
    "redacted_post",
    "scrub_damaged",
    "scrub_state",
    "state_holds",
]

log = logging.getLogger("mattermostd")

STORE = "mattermost"
"""The store name the bridge reports its holdings under (entries' renderers know it)."""
UNIT = "records"
CARD_PROPS = "attachments"
"""The one prop of the bridge's posts that holds text (an approval's card)."""


def _holding(state: State, text: str) -> list[tuple[Inflight | OpenApproval, Any]]:
    """The state's posts in flight and approvals holding `text`, each with its redacted form."""
    records: list[Inflight | OpenApproval] = [*state.inflight, *state.approvals.values()]
    found = [(record, proto.redact_record(record, text)) for record in records]
    return [(record, redacted) for record, redacted in found if redacted is not None]


def _waiting(state: State, text: str) -> list[str]:
    """The changes waiting for a yes that hold `text`."""
    found = state.confirmations.values()
    return [c.id for c in found if proto.redact_record(c, text) is not None]


def state_holds(state: State, text: str) -> int:
    """How many records of the state hold `text` (posts in flight, approvals, changes)."""
    return len(_holding(state, text)) + len(_waiting(state, text))


def scrub_state(state: State, text: str) -> int:
    """Take `text` out of the state, in place; how many records held it.

    The records are changed where they are, so a turn holding one (a post in flight)
    sees the redacted text too and never sends `text` to loopd again. A change waiting
    for a yes is dropped, not redacted: a yes would apply a change nobody was shown.
    """
    holding = _holding(state, text)
    for record, redacted in holding:
        for name in record.__struct_fields__:
            setattr(record, name, getattr(redacted, name))
    dropped = _waiting(state, text)
    for ident in dropped:
        del state.confirmations[ident]
        log.info("the waiting change %s held a forgotten text: it was dropped", ident)
    return len(holding) + len(dropped)


# -- the damaged copies -------------------------------------------------------------------

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)


def _copy_holds(raw: bytes, text: str) -> bool:
    """Whether a file that does not decode as JSON holds `text`, plainly or escaped."""
    if proto.holds(raw.decode("utf-8", errors="replace"), text):
        return True
    for literal in _JSON_STRING.findall(raw):
        whole = literal if len(literal) > 1 and literal.endswith(b'"') else literal + b'"'
        try:
            decoded = msgspec.json.decode(whole)
        except msgspec.DecodeError:
            continue
        if isinstance(decoded, str) and proto.holds_value(decoded, text):
            return True
    return False


def _decoded(raw: bytes) -> tuple[bool, Any]:
    try:
        return True, msgspec.json.decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return False, None


def damaged_holding(paths: list[Path], text: str) -> list[Path]:
    """The damaged copies among `paths` that hold `text`."""
    found = []
    for path in paths:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue
        whole, value = _decoded(raw)
        if proto.holds_value(value, text) if whole else _copy_holds(raw, text):
            found.append(path)
    return found


def scrub_damaged(paths: list[Path], text: str) -> list[Path]:
    """Redact (JSON) or delete (anything else) each damaged copy holding `text`."""
    holding = damaged_holding(paths, text)
    for path in holding:
        whole, value = _decoded(path.read_bytes())
        if whole:
            proto.write_atomically(path, msgspec.json.encode(proto.redact_value(value, text)))
        else:
            path.unlink()
            proto.fsync_dir(path.parent)
            log.info("the damaged copy %s held a forgotten text: it was deleted", path.name)
    return holding


def holding(records: int, copies: list[Path], state_file: Path) -> list[proto.Holding]:
    """The bridge's holdings as a preview or an answer shows them (none when nothing)."""
    count = records + len(copies)
    if not count:
        return []
    names = ([state_file.name] if records else []) + [p.name for p in copies]
    return [proto.Holding(store=STORE, count=count, unit=UNIT, names=names)]


# -- the posts ----------------------------------------------------------------------------


def post_holds(post: Post, text: str) -> bool:
    """Whether a post's message, or an approval card's text, holds `text`."""
    card = post.props.get(CARD_PROPS)
    return proto.holds(post.message, text) or (card is not None and proto.holds_value(card, text))


def _redact_leaves(value: Any, text: str) -> Any:
    """`value` with `text` out of each string in it, its keys left as they are."""
    if isinstance(value, str):
        return proto.redact_value(value, text)
    if isinstance(value, dict):
        return {k: _redact_leaves(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_leaves(v, text) for v in value]
    return value


@dataclass(frozen=True)
class RedactedPost:
    """What one of the bridge's posts becomes: its message, and its props if they change."""

    message: str
    props: dict[str, Any] | None


def redacted_post(post: Post, text: str) -> RedactedPost:
    """The bridge's post with `text` taken out of its message and its card."""
    props = None
    card = post.props.get(CARD_PROPS)
    if card is not None and proto.holds_value(card, text):
        props = {**post.props, CARD_PROPS: _redact_leaves(card, text)}
    return RedactedPost(proto.redact(post.message, text), props)


def permalink(url: str, post_id: str) -> str:
    """A link to a post that works without knowing its team (Mattermost 5.16 and later)."""
    return f"{url.rstrip('/')}/_redirect/pl/{post_id}"


def merged(*parts: list[proto.Holding]) -> list[proto.Holding]:
    """The bridge's holdings of two passes of one forget, as one."""
    count = sum(h.count for part in parts for h in part)
    if not count:
        return []
    names = list(dict.fromkeys(n for part in parts for h in part for n in h.names))
    return [proto.Holding(store=STORE, count=count, unit=UNIT, names=names)]
