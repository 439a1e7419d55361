"""Every message kind on every socket.

A message is a frozen, keyword-only `msgspec.Struct` in one tagged union whose tag field
is `kind`; each tag is written out, so renaming a class never changes the wire. Frames
ignore unknown fields, for compatibility across versions.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, assert_never

import msgspec

from ._forget_plan import PlanId
from ._ids import SessionId
from ._label import Class, Label
from ._records import (
    AppliedEdit,
    Decided,
    HandChange,
    HitSource,
    JournalFile,
    JournalLine,
    Status,
    Surface,
)
from ._tools import MemoryAction, MemoryArgs, MemoryFile

__all__ = [
    "MAX_PART_CHARS",
    "NOT_DECIDED",
    "AllMessages",
    "ApprovalDecide",
    "ApprovalPending",
    "ApprovalRevise",
    "ApprovalRevised",
    "Approvals",
    "ApprovalsList",
    "Approve",
    "AssistantText",
    "AuditVerified",
    "AuditVerify",
    "Authority",
    "BaselinePreview",
    "BaselinePreviewReply",
    "CallState",
    "CallStateReply",
    "Deny",
    "EntryPart",
    "Error",
    "Forget",
    "ForgetAbort",
    "ForgetApplied",
    "ForgetApply",
    "ForgetEntry",
    "ForgetLook",
    "ForgetLooked",
    "ForgetOnRecord",
    "ForgetPrepare",
    "ForgetPrepared",
    "ForgetPreview",
    "ForgetPreviewed",
    "ForgetProgress",
    "Forgotten",
    "FoundEntry",
    "GrantInfo",
    "GrantProblem",
    "Grants",
    "GrantsList",
    "HistoryEdit",
    "Holding",
    "MemoryAmbiguous",
    "MemoryBlock",
    "MemoryBlockReply",
    "MemoryEdit",
    "MemoryFind",
    "MemoryFound",
    "MemoryHistory",
    "MemoryHistoryReply",
    "MemoryNotFound",
    "MemoryWhy",
    "MemoryWhyReply",
    "Message",
    "ModelInfo",
    "ModelInfoReply",
    "NoSuchEdit",
    "Ok",
    "OwnerRecall",
    "OwnerRecalled",
    "PartLeft",
    "PendingApproval",
    "RecallHit",
    "RecallQuery",
    "Reindex",
    "Reindexed",
    "Say",
    "SessionOpen",
    "SessionOpened",
    "SessionUpdated",
    "ToolCall",
    "ToolCalled",
    "ToolRequest",
    "ToolResponse",
    "ToolResult",
    "TurnDone",
    "TurnEvent",
    "TurnFollow",
    "UndoHandChange",
    "UndoPlan",
    "UndoPlanned",
    "WhyEdit",
    "WhyEntry",
]


class Message(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """The base of every frame; `kind` carries the tag."""


# -- payloads (untagged) -----------------------------------------------------------------


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call as the model made it; `arguments` is the model's raw JSON string."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"id", "name"})
    """A forget keeps the call's id and the tool's name; it redacts the arguments."""

    id: str
    name: str
    arguments: str


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call waiting for the owner; `arguments` is the raw text they decide on.

    Raw, exactly as the model sent it (canonicalised): each client renders it for where
    the owner reads it (`for_terminal`, `for_markdown`).
    """

    id: str
    session: str
    call_id: str
    """The id of the tool call this approval decides: its `tool_result` settles it."""
    tool: str
    arguments: str
    taint: Label
    time: str


class GrantInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded grant, as `grants_list` shows it."""

    name: str
    tool: str
    mode: Literal["auto", "ask", "deny"]
    max_taint: Class
    result_class: Class
    untrusted: bool
    grant_sha256: str
    builtin: bool = False


class WhyEdit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One applied edit in the story of an entry, as `memory_why` tells it."""

    id: str
    time: str
    action: MemoryAction
    file: JournalFile
    session: str
    call: str
    approval: str | None = None
    decided: Decided | None = None
    """Who decided it and where (None: decided before boxmaker recorded who decided)."""
    taint: Label | None = None
    """The session's label when it was decided (untrusted: it had read outside text)."""
    owner_said: str | None = None
    """The owner's last message before the call in its session, raw (None: none found)."""
    previous: str | None = None
    """The text this edit replaced or rewrote into the entry, if it was one."""


class WhyEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry holding the text asked about, and where it came from, newest edit first.

    No edits: written by hand in the file (no edit recorded).
    """

    file: Literal["memory", "user", "archive"]
    entry: str
    edits: list[WhyEdit]


class GrantProblem(msgspec.Struct, frozen=True, kw_only=True):
    """A grant file that could not be loaded, and why."""

    file: str
    message: str


# -- any socket ------------------------------------------------------------------------


class Error(Message, frozen=True, kw_only=True, tag="error"):
    """A refusal or failure: a stable `code`, a sentence, and the runbook entry if any."""

    code: str
    message: str
    runbook: str | None = None


class Ok(Message, frozen=True, kw_only=True, tag="ok"):
    """Done, with nothing to return."""


# -- loop-memory -----------------------------------------------------------------------


class MemoryBlock(Message, frozen=True, kw_only=True, tag="memory_block"):
    """Ask memoryd for the memory block of a new session."""


class MemoryBlockReply(Message, frozen=True, kw_only=True, tag="memory_block_reply"):
    """The rendered memory block."""

    text: str


class SessionUpdated(Message, frozen=True, kw_only=True, tag="session_updated", omit_defaults=True):
    """A session's log has new records (sent by loopd after each finished turn).

    `rewritten`: the forget (its plan id) for which loopd rewrote the log; memoryd makes
    the rows it indexed since its own part of that forget again from the log (a turn that
    ended in between was indexed from the log before).
    """

    session: SessionId
    rewritten: str | None = None


# -- broker-memory and loop-broker -----------------------------------------------------


class Authority(msgspec.Struct, frozen=True, kw_only=True):
    """brokerd's word to memoryd that the owner decided a call, and how.

    `approval` is the approval id (minted for an owner's own edit too), `token` brokerd's
    HMAC binding it to exactly this call (`proto.approval_token`), `decided` who decided
    and where, for the journal.
    """

    approval: str
    token: str
    decided: Decided


class ToolRequest(Message, frozen=True, kw_only=True, omit_defaults=True, tag="tool_request"):
    """Run one tool call; `taint` is the session's label so far.

    `authority` is set by brokerd, to memoryd, on a call the owner decided (approved, or
    made as their own edit), and left out otherwise: loopd sends none, and brokerd
    ignores what a request from loopd says of approvals (an `approval: null` included,
    as loopd sends it).
    """

    session: SessionId
    call: ToolCall
    taint: Label = msgspec.field(default_factory=Label)
    authority: Authority | None = None


class ToolResponse(Message, frozen=True, kw_only=True, tag="tool_response"):
    """A tool call's result and its label."""

    call_id: str
    status: Status
    content: str
    label: Label = msgspec.field(default_factory=Label)


class CallState(Message, frozen=True, kw_only=True, tag="call_state"):
    """loopd to brokerd: what became of a call whose result loopd never got (a crash)."""

    session: SessionId
    call: str


class CallStateReply(Message, frozen=True, kw_only=True, tag="call_state_reply"):
    """What brokerd's audit log says of the call.

    `unknown`: no record (brokerd never decided it, so it did not run); `denied` or
    `refused`: it did not run; `started`: it was running when the record stops (it may
    have run); `finished`: it ran to an end, with `status`.
    """

    state: Literal["unknown", "denied", "refused", "started", "finished"]
    status: Status | None = None


class ApprovalPending(Message, frozen=True, kw_only=True, tag="approval_pending"):
    """brokerd to loopd, before the `tool_response` of an `ask` call: the owner is asked."""

    approval: PendingApproval


NOT_DECIDED = "the owner did not decide before boxmaker stopped; the call did not run"
"""The `denied` answer to an `ask` call the owner had not decided when boxmaker stopped:
brokerd's when it withdraws the approval, loopd's when it stops waiting first."""


# -- owner-memory ----------------------------------------------------------------------


class Reindex(Message, frozen=True, kw_only=True, tag="reindex"):
    """Rebuild the recall index from sessions/ and archive.md."""


class Reindexed(Message, frozen=True, kw_only=True, tag="reindexed"):
    """What a reindex read: session logs, records indexed, archive entries."""

    logs: int
    records: int
    archive: int


class RecallQuery(Message, frozen=True, kw_only=True, tag="recall_query"):
    """The owner's own search; same engine as the recall tool."""

    query: str
    k: int = 5


class OwnerRecall(Message, frozen=True, kw_only=True, tag="owner_recall"):
    """The owner's own search, answered hit by hit (`owner_recalled`).

    The recall tool's engine, limits and snippets; each hit comes with its whole source,
    so the owner's surface can name the record it came from. Like `recall_query`, it
    leaves no line in the recall log: the log counts what the model recalled.
    """

    query: str
    k: int = 5


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One hit: where it came from, its label, and the snippet the recall tool shows of it."""

    source: HitSource
    label: Label
    snippet: str


class OwnerRecalled(Message, frozen=True, kw_only=True, tag="owner_recalled"):
    """The hits of an `owner_recall`, best first (none when nothing matched).

    `label` is the recall tool's label of the same answer: the highest class among the
    hits (at least private), untrusted if any hit is.
    """

    hits: list[RecallHit]
    label: Label


class MemoryHistory(Message, frozen=True, kw_only=True, tag="memory_history", omit_defaults=True):
    """Ask for the edit journal, optionally of one file ("memory" or "user").

    `before` asks only for the edits older than the one at that position (0 is the
    oldest): the page after a reply that left `older` edits out.
    """

    file: MemoryFile | None = None
    before: Annotated[int, msgspec.Meta(ge=0)] | None = None


class HistoryEdit(msgspec.Struct, frozen=True, kw_only=True):
    """A line of the edit journal and its id (`edit_id`), as the owner names it to undo it."""

    id: str
    line: JournalLine


class MemoryHistoryReply(
    Message, frozen=True, kw_only=True, tag="memory_history_reply", omit_defaults=True
):
    """The newest edits of the journal that fit in one frame, oldest first.

    `older` is how many older edits were left out (0 when none): ask again with
    `before = older` for them. A journal outgrows a frame after a few hundred edits.
    """

    edits: list[HistoryEdit]
    older: Annotated[int, msgspec.Meta(ge=0)] = 0


MAX_PART_CHARS = 2000
"""The longest text the owner may name an entry by (`memory_why`, `memory_find`)."""

EntryPart = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PART_CHARS)]
"""Any part of an entry's text, as the owner names an entry."""


class MemoryWhy(Message, frozen=True, kw_only=True, tag="memory_why"):
    """Where each entry holding `part` came from (memory.md, user.md, archive.md)."""

    part: EntryPart


class MemoryWhyReply(Message, frozen=True, kw_only=True, tag="memory_why_reply"):
    """The entries holding the text, each with the edits that made it, newest first."""

    entries: list[WhyEntry]
    omitted: Annotated[int, msgspec.Meta(ge=0)] = 0
    """How many more entries hold the text than fit in one frame (ask with more of it)."""


class FoundEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry of memory.md or user.md, whole."""

    file: MemoryFile
    entry: str


class MemoryFind(Message, frozen=True, kw_only=True, tag="memory_find", omit_defaults=True):
    """The one entry of memory.md or user.md (of `file` only, if given) the owner means by `part`.

    One rule, memoryd's, for every surface: the entries holding `part` (case-insensitive);
    an entry that is `part` exactly wins over those merely holding it, so a short entry
    inside a longer one can still be named.
    """

    part: EntryPart
    file: MemoryFile | None = None


class MemoryFound(Message, frozen=True, kw_only=True, tag="memory_found"):
    """The entry `part` names."""

    found: FoundEntry


class MemoryAmbiguous(Message, frozen=True, kw_only=True, tag="memory_ambiguous"):
    """Several entries hold `part` and none is it exactly: the owner says more of one."""

    entries: list[FoundEntry]
    omitted: Annotated[int, msgspec.Meta(ge=0)] = 0
    """How many more entries hold it than fit in one frame."""


class MemoryNotFound(Message, frozen=True, kw_only=True, tag="memory_not_found"):
    """No entry holds `part`."""


class UndoPlan(Message, frozen=True, kw_only=True, tag="undo_plan", omit_defaults=True):
    """Plan the undo of an applied edit: the last one, or the one whose id is `edit`.

    memoryd reads the whole journal, so an edit of any age is found; the owner's surface
    shows the plan, and once the owner confirms sends `undo` as their own edit.
    """

    edit: str | None = None


class UndoPlanned(Message, frozen=True, kw_only=True, tag="undo_planned"):
    """The edit `id` and the edit that undoes it (its inverse, worked out from the journal)."""

    id: str
    edit: AppliedEdit
    undo: MemoryArgs


class UndoHandChange(Message, frozen=True, kw_only=True, tag="undo_hand_change"):
    """The edit asked for is a change made by hand (or found at start): nothing to undo."""

    id: str
    change: HandChange


class NoSuchEdit(Message, frozen=True, kw_only=True, tag="no_such_edit", omit_defaults=True):
    """No edit has the id `edit` (or, with none asked for, the journal is empty)."""

    edit: str | None = None


# -- owner-broker ----------------------------------------------------------------------


class ApprovalsList(Message, frozen=True, kw_only=True, tag="approvals_list", omit_defaults=True):
    """List the pending approvals; with `ids`, only those of them still pending.

    `ids` asks for the approvals a reply left out (its `more`).
    """

    ids: list[str] | None = None


class Approvals(Message, frozen=True, kw_only=True, tag="approvals", omit_defaults=True):
    """The pending approvals that fit in one frame, oldest first.

    Without paging (`more` empty, left out) it is the original `{pending}` exactly.

    `more` names the pending approvals left out (an approval's arguments may take most
    of a frame): ask for them with `ApprovalsList(ids=more)`.
    """

    pending: list[PendingApproval]
    more: list[str] = msgspec.field(default_factory=list)


class Approve(msgspec.Struct, frozen=True, kw_only=True):
    """The owner approves a pending call: as the model made it, or in `version`."""

    version: str | None = None
    """The owner's own arguments for the call (edit before approve), which brokerd parses
    with the same rules (same tool, and for a memory call the same action and file)."""
    note: str | None = None
    """The owner's words on the approval, for the audit."""


class Deny(msgspec.Struct, frozen=True, kw_only=True):
    """The owner denies a pending call, with their reason if they gave one."""

    reason: str | None = None


class ApprovalDecide(Message, frozen=True, kw_only=True, omit_defaults=True, tag="approval_decide"):
    """The owner's decision on one pending approval: `approval_decide {id, approve, reason?}`.

    On the wire as it always was, plus `arguments`, the owner's own version of
    the call (only with `approve`), and `surface`, where the owner decided (brokerd fills
    in the peer's uid itself, and bxctl when there is none). Code reads `verdict`; build
    one with `deciding`. A denial with arguments is not a frame (decoding refuses it).
    """

    id: str
    approve: bool
    reason: str | None = None
    arguments: str | None = None
    surface: Surface | None = None

    def __post_init__(self) -> None:
        """Refuse arguments with a denial: a denied call runs in no version."""
        if not self.approve and self.arguments is not None:
            raise ValueError("arguments go with an approval only: a denied call runs in no version")

    @property
    def verdict(self) -> Approve | Deny:
        """The decision: approve (in the owner's version, with their note) or deny."""
        if self.approve:
            return Approve(version=self.arguments, note=self.reason)
        return Deny(reason=self.reason)

    @classmethod
    def deciding(
        cls, approval: str, verdict: Approve | Deny, *, surface: Surface | None = None
    ) -> ApprovalDecide:
        """The frame that settles `approval` with `verdict`, decided where `surface` says."""
        match verdict:
            case Approve(version=version, note=note):
                return cls(
                    id=approval, approve=True, reason=note, arguments=version, surface=surface
                )
            case Deny(reason=reason):
                return cls(id=approval, approve=False, reason=reason, surface=surface)
            case _:
                assert_never(verdict)


class ApprovalRevise(Message, frozen=True, kw_only=True, tag="approval_revise"):
    """Check the owner's version of a pending call's arguments without deciding.

    The reply is the version as it would run (canonical), to show the owner before they
    approve it (the Mattermost bridge's `edit CODE: …`), or an `error` saying why not.
    """

    id: str
    arguments: str


class ApprovalRevised(Message, frozen=True, kw_only=True, tag="approval_revised"):
    """The owner's version as brokerd would run it."""

    id: str
    arguments: str


class MemoryEdit(Message, frozen=True, kw_only=True, tag="memory_edit"):
    """The owner's own memory edit: a `memory` call the owner makes (owner-broker).

    Decided `owner`, audited with its `surface`, applied by memoryd with the same rules
    and sentences as an approved call, journalled; the reply is memoryd's `tool_response`.
    `session` is the session the owner typed it in, if any (`OWNER_SESSION` otherwise);
    `undoes` names the edit an undo inverts.
    """

    arguments: str
    surface: Surface
    session: SessionId | None = None
    undoes: str | None = None


class GrantsList(Message, frozen=True, kw_only=True, tag="grants_list"):
    """List the loaded grants and the grant files that failed to load."""


class Grants(Message, frozen=True, kw_only=True, tag="grants"):
    """The loaded grants (built-in ones included) and the load problems."""

    grants: list[GrantInfo]
    problems: list[GrantProblem]


class AuditVerify(Message, frozen=True, kw_only=True, tag="audit_verify"):
    """Walk the audit log's hash chain."""


class ForgetOnRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A forget the audit log records: when, where the owner asked, how many records it redacted.

    `surface` is absent when the forget's own record is not (yet) in the log: brokerd
    stopped between redacting and recording it.
    """

    plan: str
    time: str
    surface: Surface | None = None
    records: int


class AuditVerified(Message, frozen=True, kw_only=True, tag="audit_verified"):
    """How many records the chain holds, the first broken one if any, and the forgets.

    A text a forget redacted (listed by the forget) is not a break; `forgets` says each.
    """

    records: int
    ok: bool
    broken_at: str | None = None
    forgets: list[ForgetOnRecord] = msgspec.field(default_factory=list)


# -- forget (owner-broker; broker-memory and broker-loop) -------------------------------


class Holding(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How much of one store holds a text to forget: `count` `unit` (no text)."""

    store: str
    """"journal", "recall log", "index", "sessions", "baselines", "audit", ..."""
    count: Annotated[int, msgspec.Meta(ge=0)]
    unit: str
    names: list[str] = msgspec.field(default_factory=list)
    """What it names, where that helps the owner: the sessions that hold it."""


class ForgetEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry of memory.md, user.md or archive.md that a forget removes whole."""

    file: Literal["memory", "user", "archive"]
    entry: str


class ForgetLook(Message, frozen=True, kw_only=True, tag="forget_look"):
    """What of this role's stores holds `text` (broker-memory, broker-loop): writes nothing."""

    text: str


class ForgetLooked(Message, frozen=True, kw_only=True, tag="forget_looked", omit_defaults=True):
    """This role's part of a preview.

    Its holdings, the entries a forget removes whole, and up to 10 near matches (records
    with every word of the text but not the text).
    """

    holdings: list[Holding]
    entries: list[ForgetEntry] = msgspec.field(default_factory=list)
    near: list[str] = msgspec.field(default_factory=list)


class ForgetPrepare(Message, frozen=True, kw_only=True, tag="forget_prepare"):
    """Write this role's plan for forgetting `text` (no text in it); change nothing yet."""

    plan: PlanId
    text: str


class ForgetPrepared(Message, frozen=True, kw_only=True, tag="forget_prepared"):
    """The plan is written; what it will change."""

    plan: str
    holdings: list[Holding]


class ForgetApply(Message, frozen=True, kw_only=True, tag="forget_apply", omit_defaults=True):
    """The forget is decided: apply the plan, verify it, end it.

    `text` is given while brokerd has it (the owner's request), so copies written since
    the plan was made (a turn that ended meanwhile) are planned and taken out too; a
    retry after brokerd restarted has none and finishes the stored plan. A plan that
    ended before answers `forget_applied` again; one the role never heard of, without
    the text, is refused (`forget-unknown`), never answered as done.
    """

    plan: PlanId
    text: str | None = None


class ForgetApplied(Message, frozen=True, kw_only=True, tag="forget_applied", omit_defaults=True):
    """The plan is applied, verified and ended.

    `conflicts` are places found changed since the plan was made (left, reported);
    `again`: it had ended before this request (an answer lost, asked again).
    """

    plan: str
    holdings: list[Holding] = msgspec.field(default_factory=list)
    conflicts: list[str] = msgspec.field(default_factory=list)
    again: bool = False


class ForgetAbort(Message, frozen=True, kw_only=True, tag="forget_abort"):
    """The forget was not decided (a role failed to prepare): end the plan, unapplied.

    An abort that comes before its prepare still bars it (the prepare is refused).
    """

    plan: PlanId


class ForgetPreview(Message, frozen=True, kw_only=True, tag="forget_preview"):
    """What a forget of `text` would change, store by store (owner-broker): writes nothing."""

    text: str


class ForgetPreviewed(
    Message, frozen=True, kw_only=True, tag="forget_previewed", omit_defaults=True
):
    """The preview: memoryd's, loopd's and brokerd's holdings together."""

    holdings: list[Holding]
    entries: list[ForgetEntry] = msgspec.field(default_factory=list)
    near: list[str] = msgspec.field(default_factory=list)


class Forget(Message, frozen=True, kw_only=True, tag="forget", omit_defaults=True):
    """The owner's forget of `text`, after its preview (owner-broker): cannot be undone."""

    text: str
    surface: Surface
    session: SessionId | None = None


class ForgetProgress(Message, frozen=True, kw_only=True, tag="forget_progress"):
    """A forget (or its preview) under way, sent every few seconds before its answer.

    `working`: the roles still at their part; `gone`: those not running, waited for
    (`bxctl up` or systemd restarts a role that died) for at most `bound_s` in all.
    """

    step: Literal["preview", "prepare", "apply"]
    working: list[str] = msgspec.field(default_factory=list)
    gone: list[str] = msgspec.field(default_factory=list)
    waited_s: int = 0
    bound_s: int = 0


class PartLeft(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A role whose part of a decided forget had not finished when the owner was answered.

    `holdings` is what its part will take out; `why` says why it has not yet, in words
    for the owner. brokerd finishes it by itself once the role answers (across restarts
    of either), without the text.
    """

    part: str
    why: str
    holdings: list[Holding] = msgspec.field(default_factory=list)


class Forgotten(Message, frozen=True, kw_only=True, tag="forgotten", omit_defaults=True):
    """The forget is decided: what each store took out, and what is still to finish.

    `holdings`: what the roles that finished took out. `left`: the roles still to finish,
    each with its reason. `lost`: the roles that no longer had their plan (what they hold
    of the text stays until it is forgotten again). `denied`: the pending approvals the
    forget denied because their arguments held the text (after the decision, never before).
    """

    plan: str
    holdings: list[Holding]
    left: list[PartLeft] = msgspec.field(default_factory=list)
    lost: list[PartLeft] = msgspec.field(default_factory=list)
    conflicts: list[str] = msgspec.field(default_factory=list)
    denied: list[str] = msgspec.field(default_factory=list)


# -- owner-loop ------------------------------------------------------------------------


class SessionOpen(Message, frozen=True, kw_only=True, tag="session_open"):
    """Open a session: a new one, or the one named by `session`."""

    origin: str
    session: SessionId | None = None


class SessionOpened(Message, frozen=True, kw_only=True, tag="session_opened"):
    """The session opened, and whether it was created now."""

    session: SessionId
    created: bool


class Say(Message, frozen=True, kw_only=True, tag="say"):
    """The owner's message: runs one turn.

    A client that leaves mid-turn cancels it (bxctl chat's Ctrl-C), unless `keep_going`:
    the Mattermost bridge's turns finish without it, and a restarted bridge picks the
    turn up with `turn_follow`, by the `ref` it gave (recorded in the user record).
    """

    session: SessionId
    text: str
    ref: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    """The client's own name for this message (`mm:<post id>`); at most 64 characters."""
    keep_going: bool = False


class TurnFollow(Message, frozen=True, kw_only=True, tag="turn_follow"):
    """Follow the turn that answers the message named `ref`, running or finished.

    The reply is every event of that turn from its start, then its `turn_done`, or an
    `error`: `turn-not-found` (no message of the session has that ref: the `say` never
    arrived) or `turn-interrupted` (it stopped before its answer). A running turn's
    events come as it emits them (runs of `assistant_text` may arrive joined); a finished
    turn's are rebuilt from the session's records: the text of each assistant message,
    each `tool_called` followed by its `tool_result` (status read from the recorded
    content), no `approval_pending`.
    """

    session: SessionId
    ref: Annotated[str, msgspec.Meta(max_length=64)]


class AssistantText(Message, frozen=True, kw_only=True, tag="assistant_text"):
    """A piece of the assistant's answer, as the model streams it."""

    text: str


class ToolCalled(Message, frozen=True, kw_only=True, tag="tool_called"):
    """The model called a tool; its result follows as a `tool_result`."""

    call: ToolCall


class ToolResult(Message, frozen=True, kw_only=True, tag="tool_result"):
    """A tool call's result, as the session's log records it."""

    call: ToolCall
    status: Status
    content: str
    label: Label


TurnEvent = AssistantText | ToolCalled | ToolResult | ApprovalPending
"""What happens during a turn, sent on owner-loop before its `turn_done` (or `error`).

`approval_pending` is brokerd's own frame, passed on as it came: the owner is asked.
"""


class BaselinePreview(Message, frozen=True, kw_only=True, tag="baseline_preview"):
    """Ask loopd for the baseline a new session would get now, without creating one."""


class BaselinePreviewReply(Message, frozen=True, kw_only=True, tag="baseline_preview_reply"):
    """The system prompt and tool schemas a new session would start with."""

    system: str
    tools: list[dict[str, object]]
    model: str
    model_url: str


class ModelInfo(Message, frozen=True, kw_only=True, tag="model_info"):
    """Ask loopd which model server it uses (cheap: no baseline, no memoryd)."""


class ModelInfoReply(Message, frozen=True, kw_only=True, tag="model_info_reply"):
    """The model loopd sends turns to, and the server's URL."""

    model: str
    url: str


class TurnDone(Message, frozen=True, kw_only=True, tag="turn_done"):
    """The turn finished; `text` is the assistant's final message."""

    text: str


AllMessages = (
    Error
    | Ok
    | MemoryBlock
    | MemoryBlockReply
    | SessionUpdated
    | ToolRequest
    | ToolResponse
    | ApprovalPending
    | CallState
    | CallStateReply
    | Reindex
    | Reindexed
    | RecallQuery
    | OwnerRecall
    | OwnerRecalled
    | MemoryHistory
    | MemoryHistoryReply
    | ApprovalsList
    | Approvals
    | ApprovalDecide
    | ApprovalRevise
    | ApprovalRevised
    | MemoryEdit
    | MemoryWhy
    | MemoryWhyReply
    | MemoryFind
    | MemoryFound
    | MemoryAmbiguous
    | MemoryNotFound
    | UndoPlan
    | UndoPlanned
    | UndoHandChange
    | NoSuchEdit
    | GrantsList
    | Grants
    | AuditVerify
    | AuditVerified
    | SessionOpen
    | SessionOpened
    | Say
    | TurnFollow
    | AssistantText
    | ToolCalled
    | ToolResult
    | TurnDone
    | BaselinePreview
    | BaselinePreviewReply
    | ModelInfo
    | ModelInfoReply
    | ForgetLook
    | ForgetLooked
    | ForgetPrepare
    | ForgetPrepared
    | ForgetApply
    | ForgetApplied
    | ForgetAbort
    | ForgetPreview
    | ForgetPreviewed
    | Forget
    | ForgetProgress
    | Forgotten
)
"""Every kind; the codec decodes against this union and the socket checks the kind."""
