"""A forget as the owner reads it: the preview, store by store, and what was done.

The preview names every store that holds the text and how much of it, the entries that
go whole, near matches the owner may also mean, and what no forget can reach; the answer
after it never quotes the text (on Mattermost it is a post, and posts are kept).
"""

from __future__ import annotations

import proto
from proto import ForgetApplied, ForgetLooked, ForgetPreviewed, ForgetProgress, Forgotten, Holding

from ._answer import Answer, Block, Line, Quote, line

__all__ = [
    "STORES",
    "UNREACHABLE",
    "describe_forget",
    "describe_forgotten",
    "describe_progress",
]

STORES: dict[str, str] = {
    "memory files": "entries of memory.md, user.md and archive.md",
    "journal": "the edit journal (those edits can no longer be undone)",
    "recall log": "the recall log",
    "index": "the recall index",
    "sessions": "session messages",
    "baselines": "session baselines (the memory a session began with)",
    "audit": "the audit log (its chain stays verifiable)",
    "chat history": "the chat's input history",
    "mattermost": "the Mattermost bridge's state",
}
"""Each store a role reports, as the owner reads it, in the order the preview lists them."""

UNREACHABLE: tuple[str, ...] = (
    "copies already sent to the model server",
    "your own Mattermost posts, and Mattermost's own storage and edit history",
    "backups, and the disk's blocks below the files (full-disk encryption covers those)",
    "words that say the same thing differently",
)
"""What no forget can reach, said in every preview."""

_NAMES_SHOWN = 10
_FILES = {"memory": "memory.md", "user": "user.md", "archive": "archive.md"}


def _ordered(holdings: list[Holding]) -> list[Holding]:
    order = list(STORES)
    return sorted(
        (h for h in holdings if h.count),
        key=lambda h: order.index(h.store) if h.store in order else len(order),
    )


def _unit(holding: Holding) -> str:
    """`lines`, or `line` for one (`entries`: `entry`)."""
    if holding.count != 1:
        return holding.unit
    if holding.unit.endswith("ies"):
        return holding.unit[:-3] + "y"
    return holding.unit.removesuffix("s")


def _holding(holding: Holding, depth: int = 1) -> list[Line]:
    label = STORES.get(holding.store, holding.store)
    parts = [line(f"{label}: {holding.count:,} {_unit(holding)}", depth=depth)]
    if holding.names:
        shown = holding.names[:_NAMES_SHOWN]
        more = len(holding.names) - len(shown)
        pieces: list[str | Quote] = []
        for name in shown:
            pieces += [", " if pieces else "", Quote(name)]
        if more:
            pieces.append(f" and {more:,} more")
        parts.append(line(*pieces, depth=depth + 1))
    return parts


def describe_forget(
    text: str, previewed: ForgetPreviewed, own: ForgetLooked
) -> tuple[Answer, bool]:
    """The preview of forgetting `text`, and whether anything holds it at all."""
    holdings = _ordered([*previewed.holdings, *own.holdings])
    entries = previewed.entries
    anything = bool(holdings or entries)
    parts: list[Line | Block] = []
    if anything:
        parts.append(line("forget ", Quote(text), " (in any case) from every file that holds it:"))
    else:
        parts.append(line("nothing boxmaker wrote holds ", Quote(text), " (in any case)"))
    for entry in entries:
        parts.append(line(f"{_FILES[entry.file]}: this entry goes, whole:", depth=1))
        parts.append(Block(entry.entry, depth=2))
    for holding in holdings:
        parts += _holding(holding)
    if anything:
        parts.append(line(f"everywhere else, each copy becomes {proto.MARKER}", depth=1))
    if previewed.near:
        parts.append(
            line(
                "near matches (every word, but not the text; forget them too with their "
                "own words if you mean them):"
            )
        )
        parts += [Block(near, depth=1, mark="~") for near in previewed.near]
    if not anything:
        return Answer(tuple(parts), ok=False), False
    parts.append(line("no forget can reach:"))
    parts += [line(what, depth=1) for what in UNREACHABLE]
    parts.append(line("a forget cannot be undone: to have it back, you would tell it again"))
    return Answer(tuple(parts)), True


def describe_forgotten(forgotten: Forgotten, own: ForgetApplied) -> Answer:
    """What a forget did, store by store, and what is still to finish; never the text."""
    holdings = _ordered([*forgotten.holdings, *own.holdings])
    whole = not (forgotten.left or forgotten.lost)
    head = "forgotten, everywhere boxmaker had written it:" if whole else "forgotten from:"
    parts: list[Line | Block] = [line(head)]
    for holding in holdings:
        parts += _holding(holding)
    if not holdings:
        parts.append(line("nothing held it any more" if whole else "none yet", depth=1))
    if forgotten.left:
        parts.append(
            line(
                "decided, and still to finish (by itself, once each role answers again; "
                "nothing for you to do):"
            )
        )
        for left in forgotten.left:
            parts.append(line(left.part, ": ", Quote(left.why), depth=1))
            parts += [p for h in _ordered(left.holdings) for p in _holding(h, depth=2)]
    for lost in forgotten.lost:
        parts.append(
            line(
                f"{lost.part} no longer had its plan of this forget: what it holds of the text "
                "stays there; forget the text again",
                depth=0,
            )
        )
    if forgotten.denied:
        pieces: list[str | Quote] = ["denied the pending approvals that held it: "]
        for number, ident in enumerate(forgotten.denied):
            pieces += [", " if number else "", Quote(ident)]
        parts.append(line(*pieces))
    conflicts = [*forgotten.conflicts, *own.conflicts]
    if conflicts:
        parts.append(line("left as they were, changed since the forget was planned:"))
        parts += [line(Quote(where), depth=1) for where in conflicts]
    return Answer(tuple(parts), ok=not (conflicts or forgotten.lost))


def describe_progress(progress: ForgetProgress) -> str:
    """One line on how a forget is going (`forget_progress`), for a status line."""
    doing = {"preview": "looking", "prepare": "preparing", "apply": "forgetting"}[progress.step]
    said: list[str] = []
    if progress.gone:
        said.append(
            f"waiting for {' and '.join(progress.gone)} to come back (not running): "
            f"{progress.waited_s} s of at most {progress.bound_s} s"
        )
    if progress.working:
        said.append(f"{' and '.join(progress.working)} still {doing} ({progress.waited_s} s)")
    return "; ".join(said) or f"{doing} ({progress.waited_s} s)"
