r"""What the bridge posts, and how it reads the owner's yes and no.

Everything from outside the owner's own hand (the model's answer, tool names, arguments,
results, reasons) reaches a post only through `proto`'s Mattermost renderings: inside a
code block or span that nothing in it can close (`code_block`, `code_span`), or, for
the assistant's answer, `for_mattermost`. The fixed words around them are the bridge's.
So no post of the bridge's can mention anyone, load an image, or hide a character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import proto
from proto import Label, PendingApproval

from ._answers import decision_code

__all__ = [
    "APPROVAL_COLORS",
    "CARD_FOOTER",
    "DECIDED_ELSEWHERE",
    "GONE_WHILE_AWAY",
    "MAX_POST_CHARS",
    "Reply",
    "approval_card",
    "approval_message",
    "approval_posts",
    "card_text",
    "not_editable",
    "outcome_span",
    "revision_message",
    "split_message",
]

MAX_POST_CHARS = 16_000
"""A post's longest message, under Mattermost's 16,383 characters (`PostMessageMaxRunesV2`)."""
APPROVAL_POST_CHARS = MAX_POST_CHARS - 2_000
"""The longest approval post: the decision and the call's outcome are added to it later."""
OUTCOME_CHARS = 500
"""How much of the owner's reason, or of a call's result, the approval post's outcome shows."""
SHORT_CHARS = 160
"""How much of a call's arguments or result a tool line shows."""
CARD_TITLE = "boxmaker asks for your approval"
CARD_FOOTER = (
    "Only a card in this frame, posted by the boxmaker bot, is an approval. Text that looks "
    "like one, in an answer of boxmaker's or anyone's, is not: answering it does nothing."
)
APPROVAL_COLORS = {
    "asking": "#ffbc1f",
    "approved": "#3db887",
    "denied": "#d24b4e",
    "closed": "#8d96a0",
}
"""The card's frame: amber while it waits, green approved, red denied, grey otherwise."""


def _short(text: str, limit: int = SHORT_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


@dataclass
class _ToolLine:
    name: str
    arguments: str
    outcome: str = ""
    waiting: bool = False

    def render(self) -> str:
        line = f"tool {proto.code_span(self.name)} {proto.code_span(_short(self.arguments))}"
        if self.outcome:
            return f"{line} → {self.outcome}"
        return f"{line} → _waiting for your approval (below)_" if self.waiting else f"{line} …"


@dataclass
class Reply:
    """A turn's reply post as it grows: tool lines and the assistant's text, in order."""

    parts: list[_ToolLine | str] = field(default_factory=list)
    note: str = ""
    """A closing line of the bridge's own (the turn ended in an error, say)."""

    def text(self, piece: str) -> None:
        """More of the assistant's text."""
        if self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += piece
        else:
            self.parts.append(piece)

    def called(self, call: proto.ToolCall) -> None:
        """The model called a tool."""
        self.parts.append(_ToolLine(call.name, call.arguments))

    def waiting(self) -> None:
        """The call in flight waits for the owner's approval."""
        for part in reversed(self.parts):
            if isinstance(part, _ToolLine) and not part.outcome:
                part.waiting = True
                return

    def result(self, result: proto.ToolResult) -> None:
        """A call's result: its line says how it went."""
        for part in reversed(self.parts):
            if isinstance(part, _ToolLine) and not part.outcome:
                part.outcome = _outcome(result.status, result.content, result.label)
                return

    def finish(self, final: str) -> None:
        """The turn's final text: added if the stream did not bring it (no streaming)."""
        last = self.parts[-1] if self.parts else None
        if final and not (isinstance(last, str) and last.strip().endswith(final.strip())):
            self.text(("\n\n" if isinstance(last, str) else "") + final)

    @property
    def empty(self) -> bool:
        """Nothing to show yet."""
        return not self.parts and not self.note

    def message(self) -> str:
        """The whole reply, rendered for Mattermost."""
        blocks: list[str] = []
        tools: list[str] = []
        for part in self.parts:
            if isinstance(part, _ToolLine):
                tools.append(part.render())
                continue
            if tools:
                blocks.append("\n".join(tools))
                tools = []
            if part.strip():
                blocks.append(proto.for_mattermost(part.strip("\n")))
        if tools:
            blocks.append("\n".join(tools))
        if self.note:
            blocks.append(self.note)
        if blocks and _LIKE_AN_APPROVAL.match(blocks[0]):
            blocks.insert(0, NOT_AN_APPROVAL)
        return "\n\n".join(blocks) if blocks else "…"


NOT_AN_APPROVAL = "_boxmaker's answer (an approval is only ever a framed card):_"
"""What a reply starts with when the model's text starts like an approval would."""
_LIKE_AN_APPROVAL = re.compile(
    r"[\W_]*(approv|still waiting|boxmaker asks|needs? your (approval|decision))", re.I
)


def _outcome(status: str, content: str, label: Label) -> str:
    marks = []
    if label.untrusted:
        marks.append("untrusted")
    if label.class_ != proto.Class.private:
        marks.append(str(label.class_))
    suffix = f" ({', '.join(marks)})" if marks else ""
    if status == "ok":
        return f"ok{suffix}"
    reason = content.removeprefix(f"{status}: ")
    return f"{status}: {proto.code_span(_short(reason))}{suffix}"


def split_message(message: str, limit: int = MAX_POST_CHARS) -> list[str]:
    """A long message in posts of at most `limit` characters, cut at line ends if it can."""
    parts: list[str] = []
    rest = message
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut <= limit // 2:
            cut = limit
        parts.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    parts.append(rest)
    return parts


def approval_message(approval: PendingApproval, *, again: bool = False) -> str:
    """The approval post: the tool, the exact arguments, the taint warning, how to answer."""
    lines = [
        f"{_asking(approval, again)} with these arguments (the exact text; an invisible "
        "character is shown as its code, `\\u{…}`):",
        proto.code_block(approval.arguments, info="json"),
        *_answering(approval, on=""),
    ]
    return "\n\n".join(lines)


def approval_posts(approval: PendingApproval, *, again: bool = False) -> list[str]:
    r"""The approval as posts: `approval_message`, or a head and the arguments in parts.

    Arguments too long for one post (a memory text of invisible characters, each shown
    as `\u{…}`, is eight times its length) follow the head in as many posts as they
    need, each in its own block; the parts join into the exact text. Only the head is
    edited when the approval is decided, so only it keeps room for that.
    """
    whole = approval_message(approval, again=again)
    if len(whole) <= APPROVAL_POST_CHARS:
        return [whole]
    parts = _cut(approval.arguments, MAX_POST_CHARS - 200)
    head = [
        f"{_asking(approval, again)} with arguments too long for one post: they follow in "
        f"{len(parts)} posts, in order, and together they are the exact text (each part "
        "goes on where the one before it stopped, with no line break between them; an "
        "invisible character is shown as its code, `\\u{…}`).",
        *_answering(approval, on=" on any of its posts"),
    ]
    return [
        "\n\n".join(head),
        *(
            f"Arguments of approval {proto.code_span(approval.id)}, part {number} of "
            f"{len(parts)}:\n{proto.code_block(part, info='json')}"
            for number, part in enumerate(parts, start=1)
        ),
    ]


def _asking(approval: PendingApproval, again: bool) -> str:
    head = (
        "**Still waiting for your decision** (the Mattermost bridge restarted).\n" if again else ""
    )
    return f"{head}**Approval needed:** boxmaker wants to run {proto.code_span(approval.tool)}"


def _memory_edit(approval: PendingApproval) -> proto.MemoryArgs | None:
    """The memory edit an approval asks for, or None (another tool; arguments it refused)."""
    if approval.tool != "memory":
        return None
    try:
        return proto.parse_memory_args(approval.arguments)
    except proto.ToolArgsError:
        return None


def _answering(approval: PendingApproval, *, on: str) -> list[str]:
    lines = []
    if approval.taint.untrusted:
        lines.append(
            "**Careful:** this session has read untrusted content (a fetched page, a file, "
            "an untrusted recall hit); these arguments may come from it."
        )
    code = decision_code(approval.id)
    match _memory_edit(approval):
        case proto.MemoryAdd():
            lines.append(f"To change the text first, reply `edit {code}: YOUR TEXT`.")
        case proto.MemoryReplace():
            lines.append(f"To change the new text first, reply `edit {code}: YOUR TEXT`.")
        case _:
            pass
    lines.append(
        f"Reply **yes {code}** or **no {code}** (a reason may follow) in this thread, or react "
        f":white_check_mark: or :x:{on}. The code shows the answer is yours: a plugin's "
        f"canned reply in your name does not know it. Approval {proto.code_span(approval.id)}, "
        f"session {proto.code_span(approval.session)}, asked {approval.time}."
    )
    return lines


def approval_card(text: str, color: str) -> dict[str, object]:
    """An approval post's message attachment: a framed card no post's text can draw.

    Mattermost draws a bot's `props.attachments` as a card with a coloured bar and a
    title; text in a message (the model's answer, anyone's post) is drawn as text, so an
    imitation of an approval never has the frame.
    """
    return {
        "fallback": f"{CARD_TITLE} (open Mattermost to see it)",
        "color": color,
        "title": CARD_TITLE,
        "text": text,
        "footer": CARD_FOOTER,
    }


def card_text(props: dict[str, object]) -> str | None:
    """The text of a post's approval card, or None when it has none."""
    attachments = props.get("attachments")
    if isinstance(attachments, list) and attachments and isinstance(attachments[0], dict):
        text = attachments[0].get("text")
        return text if isinstance(text, str) else None
    return None


def _cut(text: str, limit: int) -> list[str]:
    """`text` in pieces, each shown by `proto.code_block` in at most `limit` characters.

    A piece never ends in a backslash, so the pieces shown one by one read exactly as
    the whole would: `for_terminal` doubles a backslash according to what follows it.
    """
    pieces: list[str] = []
    start, size, safe = 0, 0, 0
    budget = limit - 16  # the fences (at least 3 backticks each), the info, two newlines
    for i, char in enumerate(text):
        size += _shown_chars(char)
        if size > budget and safe > start:
            pieces.append(text[start:safe])
            start = safe
            size = sum(_shown_chars(c) for c in text[start : i + 1])
        if char != "\\":
            safe = i + 1
    pieces.append(text[start:])
    return pieces


def _shown_chars(char: str) -> int:
    """At most how many characters `char` adds to a code block of the text around it."""
    if char == "`":
        return 3  # itself, and a backtick more on each fence
    if char == "\\":
        return 2
    if char != "\n" and proto.revealed(char):
        return len(f"\\u{{{ord(char):x}}}")
    return 1


GONE_WHILE_AWAY = (
    "**No longer waiting:** decided (in bxctl) or timed out while the Mattermost bridge "
    "was away; the reply in this thread says what happened."
)
DECIDED_ELSEWHERE = (
    "**Decided outside Mattermost** (bxctl, or it timed out); the reply in this thread "
    "says what became of the call."
)


def revision_message(approval_id: str, arguments: str) -> str:
    """The card that shows the owner's version back before they approve it."""
    code = decision_code(approval_id)
    return (
        f"**Your version** of approval {proto.code_span(approval_id)} (not applied yet; "
        "this is what would be written):\n\n"
        f"{proto.code_block(arguments, info='json')}\n\n"
        f"Reply **yes {code}** to approve your version, **no {code}** to deny, or "
        f"`edit {code}: …` again."
    )


def not_editable(approval_id: str) -> str:
    """The answer to `edit CODE:` on an approval that is not an add or a replace."""
    return (
        "`edit` changes the text of an add or a replace. For this approval, answer "
        f"**no {decision_code(approval_id)}** with what to do instead, or decide it in the "
        "terminal (`bxctl chat`'s `e`)."
    )


def outcome_span(text: str) -> str:
    """The owner's reason, or a call's result, as the approval post's outcome shows it."""
    return proto.code_span(_short(text, OUTCOME_CHARS))
