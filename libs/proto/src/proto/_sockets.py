"""The sockets, who serves them, and the kinds each one accepts."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Generic, TypeGuard, TypeVar

from ._messages import (
    ApprovalDecide,
    ApprovalPending,
    ApprovalRevise,
    ApprovalRevised,
    Approvals,
    ApprovalsList,
    AssistantText,
    AuditVerified,
    AuditVerify,
    BaselinePreview,
    BaselinePreviewReply,
    CallState,
    CallStateReply,
    Error,
    Forget,
    ForgetAbort,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPrepare,
    ForgetPrepared,
    ForgetPreview,
    ForgetPreviewed,
    ForgetProgress,
    Forgotten,
    Grants,
    GrantsList,
    MemoryAmbiguous,
    MemoryBlock,
    MemoryBlockReply,
    MemoryEdit,
    MemoryFind,
    MemoryFound,
    MemoryHistory,
    MemoryHistoryReply,
    MemoryNotFound,
    MemoryWhy,
    MemoryWhyReply,
    Message,
    ModelInfo,
    ModelInfoReply,
    NoSuchEdit,
    Ok,
    OwnerRecall,
    OwnerRecalled,
    RecallQuery,
    Reindex,
    Reindexed,
    Say,
    SessionOpen,
    SessionOpened,
    SessionUpdated,
    ToolCalled,
    ToolRequest,
    ToolResponse,
    ToolResult,
    TurnDone,
    TurnFollow,
    UndoHandChange,
    UndoPlan,
    UndoPlanned,
)

__all__ = [
    "BROKER_LOOP",
    "BROKER_MEMORY",
    "LOOP_BROKER",
    "LOOP_MEMORY",
    "MAX_SOCKET_PATH_BYTES",
    "OWNER_BROKER",
    "OWNER_LOOP",
    "OWNER_MEMORY",
    "SOCKETS",
    "BrokerLoopRequest",
    "BrokerMemoryRequest",
    "LoopBrokerRequest",
    "LoopMemoryRequest",
    "OwnerBrokerRequest",
    "OwnerLoopRequest",
    "OwnerMemoryRequest",
    "Socket",
]

MAX_SOCKET_PATH_BYTES = 107
"""AF_UNIX paths are at most 108 bytes with the terminating NUL."""


R = TypeVar("R", bound=Message, covariant=True)

LoopMemoryRequest = MemoryBlock | SessionUpdated
ForgetRequest = ForgetLook | ForgetPrepare | ForgetApply | ForgetAbort
BrokerMemoryRequest = ToolRequest | ForgetRequest
BrokerLoopRequest = ForgetRequest
OwnerMemoryRequest = (
    Reindex
    | RecallQuery
    | OwnerRecall
    | MemoryHistory
    | MemoryWhy
    | MemoryFind
    | UndoPlan
    | MemoryBlock
)
LoopBrokerRequest = ToolRequest | CallState
OwnerBrokerRequest = (
    ApprovalsList
    | ApprovalDecide
    | ApprovalRevise
    | MemoryEdit
    | GrantsList
    | AuditVerify
    | ForgetPreview
    | Forget
)
OwnerLoopRequest = SessionOpen | Say | TurnFollow | BaselinePreview | ModelInfo
"""Each socket's requests as a union: a handler typed with one matches on its kinds and
ends with `assert_never`, so mypy proves every kind the socket accepts is handled."""


@dataclasses.dataclass(frozen=True)
class Socket(Generic[R]):
    """One (peer, server) pair: where its socket lives and what may be said on it."""

    name: str
    server: str
    peer: str
    relative_path: str
    requests: tuple[type[R], ...]
    replies: tuple[type[Message], ...]

    def default_path(self, home: Path) -> Path:
        """The socket's path under a home: `{home}/run/<peer>-<server>/<file>`."""
        return home / self.relative_path

    def accepts(self, message: Message) -> TypeGuard[R]:
        """Whether `message` is one of the kinds a peer may send on this socket."""
        return isinstance(message, self.requests)


LOOP_MEMORY: Socket[LoopMemoryRequest] = Socket(
    "loop-memory",
    "memoryd",
    "loopd",
    "run/loop-memory/memory.sock",
    (MemoryBlock, SessionUpdated),
    (MemoryBlockReply, Ok, Error),
)
BROKER_MEMORY: Socket[BrokerMemoryRequest] = Socket(
    "broker-memory",
    "memoryd",
    "brokerd",
    "run/broker-memory/memory.sock",
    (ToolRequest, ForgetLook, ForgetPrepare, ForgetApply, ForgetAbort),
    (ToolResponse, ForgetLooked, ForgetPrepared, ForgetApplied, Ok, Error),
)
BROKER_LOOP: Socket[BrokerLoopRequest] = Socket(
    "broker-loop",
    "loopd",
    "brokerd",
    "run/broker-loop/loop.sock",
    (ForgetLook, ForgetPrepare, ForgetApply, ForgetAbort),
    (ForgetLooked, ForgetPrepared, ForgetApplied, Ok, Error),
)
OWNER_MEMORY: Socket[OwnerMemoryRequest] = Socket(
    "owner-memory",
    "memoryd",
    "bxctl",
    "run/owner-memory/admin.sock",
    (
        Reindex,
        RecallQuery,
        OwnerRecall,
        MemoryHistory,
        MemoryWhy,
        MemoryFind,
        UndoPlan,
        MemoryBlock,
    ),
    (
        Reindexed,
        ToolResponse,
        OwnerRecalled,
        MemoryHistoryReply,
        MemoryWhyReply,
        MemoryFound,
        MemoryAmbiguous,
        MemoryNotFound,
        UndoPlanned,
        UndoHandChange,
        NoSuchEdit,
        MemoryBlockReply,
        Error,
    ),
)
LOOP_BROKER: Socket[LoopBrokerRequest] = Socket(
    "loop-broker",
    "brokerd",
    "loopd",
    "run/loop-broker/broker.sock",
    (ToolRequest, CallState),
    (ApprovalPending, ToolResponse, CallStateReply, Error),
)
OWNER_BROKER: Socket[OwnerBrokerRequest] = Socket(
    "owner-broker",
    "brokerd",
    "bxctl",
    "run/owner-broker/admin.sock",
    (
        ApprovalsList,
        ApprovalDecide,
        ApprovalRevise,
        MemoryEdit,
        GrantsList,
        AuditVerify,
        ForgetPreview,
        Forget,
    ),
    (
        Approvals,
        Ok,
        ApprovalRevised,
        ToolResponse,
        Grants,
        AuditVerified,
        ForgetPreviewed,
        ForgetProgress,
        Forgotten,
        Error,
    ),
)
OWNER_LOOP: Socket[OwnerLoopRequest] = Socket(
    "owner-loop",
    "loopd",
    "bxctl",
    "run/owner-loop/chat.sock",
    (SessionOpen, Say, TurnFollow, BaselinePreview, ModelInfo),
    (
        SessionOpened,
        AssistantText,
        ToolCalled,
        ToolResult,
        ApprovalPending,
        TurnDone,
        BaselinePreviewReply,
        ModelInfoReply,
        Error,
    ),
)

SOCKETS = (
    LOOP_MEMORY,
    BROKER_MEMORY,
    OWNER_MEMORY,
    LOOP_BROKER,
    OWNER_BROKER,
    OWNER_LOOP,
    BROKER_LOOP,
)
