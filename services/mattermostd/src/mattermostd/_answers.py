"""How the bridge reads the owner's answer to an approval: a reply, an edit, a reaction.

A reply is `yes CODE` or `no CODE [reason]`, an edit `edit CODE: TEXT`; a ✅ or ❌
reaction on the card decides too.

The code is the approval id's last three characters, shown on the approval's card: a
reply in the owner's name that does not name it decides nothing (a plugin's slash
command answers in-channel as the owner, unmarked; see docs/mattermost.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "APPROVE_EMOJI",
    "DENY_EMOJI",
    "OwnerAnswer",
    "OwnerApproves",
    "OwnerDenies",
    "bare_decision",
    "decision_code",
    "parse_decision",
    "parse_revision",
]

APPROVE_EMOJI = frozenset({"white_check_mark"})
"""✅ (its name in Mattermost)."""
DENY_EMOJI = frozenset({"x"})
"""❌."""


def decision_code(approval_id: str) -> str:
    """The short code a reply names to decide: the approval id's last three characters."""
    return approval_id[-3:].lower()


@dataclass(frozen=True)
class OwnerApproves:
    """The owner approves (a yes takes no reason: "yes 4uy, but…" is words for the model)."""


@dataclass(frozen=True)
class OwnerDenies:
    """The owner denies, maybe saying why."""

    reason: str | None = None


OwnerAnswer = OwnerApproves | OwnerDenies
"""The owner's answer to an approval, by a reply or a reaction."""


_DECISION = re.compile(
    r"^\s*(?P<word>yes|y|approve|no|n|deny)(?=$|[\s:,.!-])[\s:,.!-]*(?P<rest>.*?)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_CODE = re.compile(r"^(?P<code>[a-z0-9]{3})(?=$|[\s:,.!-])[\s:,.!-]*(?P<reason>.*)$", re.I | re.S)


def parse_decision(message: str, code: str) -> OwnerAnswer | None:
    """`yes CODE` / `no CODE [reason]` (and `y`, `approve`, `n`, `deny`), else None.

    The code is the one on the approval's card (`decision_code`): a reply in the owner's
    name that does not name it (a plugin's slash command answers in-channel as the owner)
    decides nothing. A `yes` followed by more words is not a decision either: "yes 4uy,
    but change the wording" is a message for the model, not an approval.
    """
    match = _DECISION.match(message)
    if match is None:
        return None
    coded = _CODE.match(match["rest"])
    if coded is None or coded["code"].lower() != code.lower():
        return None
    reason = coded["reason"].strip() or None
    if match["word"].lower() in ("no", "n", "deny"):
        return OwnerDenies(reason)
    return OwnerApproves() if reason is None else None


_REVISION = re.compile(r"^\s*edit\s+(?P<code>[a-z0-9]{3})\s*:\s*(?P<text>.*?)\s*$", re.I | re.S)


def parse_revision(message: str, code: str) -> str | None:
    """The owner's own text in `edit CODE: NEW TEXT`, or None for any other message."""
    match = _REVISION.match(message)
    if match is None or match["code"].lower() != code.lower() or not match["text"]:
        return None
    return str(match["text"])


def bare_decision(message: str) -> bool:
    """Whether `message` is a yes or a no that does not name the card's code.

    A `no` with anything after it, a `yes` alone or with one word (a mistyped code):
    the owner meant to decide, and is told how. "yes, but shorter" is words for the model.
    """
    match = _DECISION.match(message)
    if match is None:
        return False
    if match["word"].lower() in ("no", "n", "deny"):
        return True
    return len(match["rest"].split()) <= 1
