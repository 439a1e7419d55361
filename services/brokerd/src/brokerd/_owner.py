"""The owner's levers at brokerd: where they acted, and their version.

Their version: their own arguments for a pending call (edit before approve).

Invariants:
- The uid of a surface is always brokerd's own reading of the peer (SO_PEERCRED), whatever
  the client wrote: no client records a decision under another uid.
- The owner's version of a call is parsed with the model's rules (`parse_arguments`), and
  for a memory call must keep its action and file: what the owner approves is the edit the
  model asked for, worded their way, never a different one.
"""

from __future__ import annotations

import proto
from proto import PendingApproval, Surface

from ._arguments import Arguments, ArgumentsRefused, parse_arguments

__all__ = [
    "MAX_SURFACE_CHARS",
    "BadSurface",
    "RevisionRefused",
    "check_undoes",
    "revise",
    "surface_of",
]

MAX_SURFACE_CHARS = 200
"""How long a Mattermost user name or post id may be (both are 26 characters or so)."""


class BadSurface(ValueError):
    """A surface brokerd will not record (a name or post id too long to be one)."""

    code = "bad-surface"


class RevisionRefused(ValueError):
    """The owner's version of a call cannot replace the model's; the message says why."""

    code = "revision-refused"


def surface_of(claimed: Surface | None, peer_uid: int) -> Surface:
    """Where the owner acted: bxctl unless the bridge says Mattermost; the uid is the peer's.

    Raises:
        BadSurface: a Mattermost user or post longer than `MAX_SURFACE_CHARS`.
    """
    if claimed is None or claimed.via == "bxctl":
        return Surface(via="bxctl", uid=peer_uid)
    for name, value in (("user", claimed.user), ("post", claimed.post)):
        if value is not None and len(value) > MAX_SURFACE_CHARS:
            raise BadSurface(
                f"the surface's {name} is {len(value):,} characters; at most "
                f"{MAX_SURFACE_CHARS} are recorded"
            )
    return Surface(via="mattermost", uid=peer_uid, user=claimed.user, post=claimed.post)


def revise(pending: PendingApproval, raw: str) -> Arguments:
    """The owner's version of `pending`'s arguments, parsed with the same rules.

    Raises:
        RevisionRefused: not a memory call, not valid arguments, or another action or file.
    """
    if pending.tool != "memory":
        raise RevisionRefused(
            f"only memory calls can be changed before they are approved; approval "
            f"{pending.id} is for {pending.tool}"
        )
    try:
        owner = parse_arguments(pending.tool, raw)
    except ArgumentsRefused as exc:
        raise RevisionRefused(f"your version of the memory call is refused: {exc}") from None
    model = parse_arguments(pending.tool, pending.arguments).value
    mine = owner.value
    assert isinstance(model, proto.MemoryArgs)
    assert isinstance(mine, proto.MemoryArgs)
    asked = (model.action, model.file)
    given = (mine.action, mine.file)
    if given != asked:
        raise RevisionRefused(
            f"your version must {asked[0]} in the {asked[1]} file as the model's does, not "
            f"{given[0]} in {given[1]}; approve or deny the call as it is, or make your own "
            "edit"
        )
    return owner


def check_undoes(undoes: str | None) -> None:
    """Refuse an `undoes` that is not an edit id (`ed-` and six characters).

    Raises:
        ArgumentsRefused: it is not.
    """
    if undoes is not None and proto.EDIT_ID.fullmatch(undoes) is None:
        shown = undoes if len(undoes) <= 64 else undoes[:64] + "…"
        raise ArgumentsRefused(f"{shown!r} is not an edit id (ed- and six characters)")
