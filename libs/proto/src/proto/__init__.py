"""boxmaker's shared protocol: frames, message kinds, labels, ids, sockets and escaping.

Every role imports this package and nothing of another role. What needs trio (the
servers, the trio client, the role skeleton) is imported when it is first used, so that
bxctl's one-request commands, which use the blocking client, start without it.
"""

from typing import TYPE_CHECKING

from ._backoff import Backoff as Backoff
from ._blocking import call_blocking as call_blocking
from ._calls import BadReply as BadReply
from ._calls import BadRequest as BadRequest
from ._calls import CallBroken as CallBroken
from ._calls import CallFailed as CallFailed
from ._calls import CallTimedOut as CallTimedOut
from ._calls import NoReply as NoReply
from ._calls import RemoteError as RemoteError
from ._calls import RequestTooLarge as RequestTooLarge
from ._calls import Unreachable as Unreachable
from ._catalog import CATALOG_FILE as CATALOG_FILE
from ._catalog import CatalogEntry as CatalogEntry
from ._catalog import CatalogRead as CatalogRead
from ._catalog import append_to_catalog as append_to_catalog
from ._catalog import complete_catalog as complete_catalog
from ._catalog import drop_from_catalog as drop_from_catalog
from ._catalog import read_catalog as read_catalog
from ._changes import CHANGES_FILE as CHANGES_FILE
from ._changes import NO_JOURNAL as NO_JOURNAL
from ._changes import Changes as Changes
from ._changes import ChangesPlace as ChangesPlace
from ._changes import changes_since as changes_since
from ._changes import note_change as note_change
from ._codec import HEADER_BYTES as HEADER_BYTES
from ._codec import MAX_FRAME as MAX_FRAME
from ._codec import FrameReader as FrameReader
from ._codec import FrameTooLarge as FrameTooLarge
from ._codec import IncompleteFrame as IncompleteFrame
from ._codec import PeerClosed as PeerClosed
from ._codec import ProtocolError as ProtocolError
from ._codec import decode_body as decode_body
from ._codec import encode_frame as encode_frame
from ._codec import read_frame as read_frame
from ._codec import write_frame as write_frame
from ._config import BOM_SENTENCE as BOM_SENTENCE
from ._config import NEEDS_OWNER_EXIT as NEEDS_OWNER_EXIT
from ._config import ConfigError as ConfigError
from ._config import ConfigSection as ConfigSection
from ._config import NeedsOwner as NeedsOwner
from ._config import PathsSection as PathsSection
from ._config import StartFailed as StartFailed
from ._config import config_home as config_home
from ._config import config_problem as config_problem
from ._config import home_path as home_path
from ._config import peers_of as peers_of
from ._config import read_config as read_config
from ._config import socket_path as socket_path
from ._configs import EMBEDDED as EMBEDDED
from ._configs import EMBEDDED_URL_ENV as EMBEDDED_URL_ENV
from ._configs import BrokerdConfig as BrokerdConfig
from ._configs import FunctionWordsLanguage as FunctionWordsLanguage
from ._configs import LoopdConfig as LoopdConfig
from ._configs import LoopdModel as LoopdModel
from ._configs import MattermostConfig as MattermostConfig
from ._configs import MattermostId as MattermostId
from ._configs import MemorydConfig as MemorydConfig
from ._configs import MemorydRecall as MemorydRecall
from ._configs import PositiveCount as PositiveCount
from ._configs import PositiveSeconds as PositiveSeconds
from ._configs import RecallRanking as RecallRanking
from ._core_calls import BadArgs as BadArgs
from ._core_calls import Brokered as Brokered
from ._core_calls import CallTool as CallTool
from ._core_calls import Clock as Clock
from ._core_calls import CoreCall as CoreCall
from ._core_calls import FindTool as FindTool
from ._core_calls import NoSuchLocalTool as NoSuchLocalTool
from ._core_calls import NoSuchTool as NoSuchTool
from ._core_calls import parse_core_call as parse_core_call
from ._durable import append_line as append_line
from ._durable import dir_mode as dir_mode
from ._durable import file_mode as file_mode
from ._durable import fsync_dir as fsync_dir
from ._durable import write_atomically as write_atomically
from ._exchange import Exchange as Exchange
from ._forget import FORGET_MAX_CHARS as FORGET_MAX_CHARS
from ._forget import FORGET_MIN_CHARS as FORGET_MIN_CHARS
from ._forget import MARKER as MARKER
from ._forget import digest as digest
from ._forget import fold as fold
from ._forget import forget_problem as forget_problem
from ._forget import holds as holds
from ._forget import holds_text as holds_text
from ._forget import holds_value as holds_value
from ._forget import is_near as is_near
from ._forget import may_hold as may_hold
from ._forget import redact as redact
from ._forget import redact_line as redact_line
from ._forget import redact_record as redact_record
from ._forget import redact_text as redact_text
from ._forget import redact_value as redact_value
from ._forget import words as words
from ._forget_plan import ENDED_FILE as ENDED_FILE
from ._forget_plan import Ended as Ended
from ._forget_plan import FileEdit as FileEdit
from ._forget_plan import ForgetFiles as ForgetFiles
from ._forget_plan import ForgetPlan as ForgetPlan
from ._forget_plan import LineEdit as LineEdit
from ._forget_plan import LinesEdit as LinesEdit
from ._forget_plan import NoSteps as NoSteps
from ._forget_plan import PlanId as PlanId
from ._forget_plan import StructFiles as StructFiles
from ._forget_plan import WholeEdit as WholeEdit
from ._forget_plan import apply_file_edits as apply_file_edits
from ._forget_plan import line_edits as line_edits
from ._forget_plan import new_plan_id as new_plan_id
from ._forget_plan import verify_file_edit as verify_file_edit
from ._forget_plan import whole_edit as whole_edit
from ._home import DEFAULT_DRAIN_S as DEFAULT_DRAIN_S
from ._home import DEFAULT_HOME as DEFAULT_HOME
from ._home import resolve_home as resolve_home
from ._home import resolve_peers as resolve_peers
from ._ids import SESSION_ID_PATTERN as SESSION_ID_PATTERN
from ._ids import BadSessionId as BadSessionId
from ._ids import SessionId as SessionId
from ._ids import check_session_id as check_session_id
from ._ids import is_session_id as is_session_id
from ._ignorable import DEFAULT_IGNORABLE as DEFAULT_IGNORABLE
from ._ignorable import DEFAULT_IGNORABLE_UNICODE as DEFAULT_IGNORABLE_UNICODE
from ._ignorable import is_default_ignorable as is_default_ignorable
from ._jsonl import MAX_LINE_BYTES as MAX_LINE_BYTES
from ._jsonl import JsonLines as JsonLines
from ._jsonl import Line as Line
from ._jsonl import Read as Read
from ._keys import APPROVAL_KEY as APPROVAL_KEY
from ._keys import AUDIT_KEY as AUDIT_KEY
from ._keys import KEY_BYTES as KEY_BYTES
from ._keys import KeyUnusable as KeyUnusable
from ._keys import approval_token as approval_token
from ._keys import audit_head_mac as audit_head_mac
from ._keys import ensure_key as ensure_key
from ._keys import read_key as read_key
from ._keys import sign as sign
from ._label import Class as Class
from ._label import Label as Label
from ._messages import *  # noqa: F403  (every kind; the list is _messages.__all__)
from ._records import AUDIT_GENESIS as AUDIT_GENESIS
from ._records import AUDIT_HEAD as AUDIT_HEAD
from ._records import AUDIT_KINDS as AUDIT_KINDS
from ._records import AUDIT_LOG as AUDIT_LOG
from ._records import EDIT_ID as EDIT_ID
from ._records import EDIT_JOURNAL as EDIT_JOURNAL
from ._records import JOURNAL_KINDS as JOURNAL_KINDS
from ._records import OWNER_SESSION as OWNER_SESSION
from ._records import RECALL_LOG as RECALL_LOG
from ._records import AppliedEdit as AppliedEdit
from ._records import AuditCallRecord as AuditCallRecord
from ._records import AuditForget as AuditForget
from ._records import AuditHead as AuditHead
from ._records import AuditMigration as AuditMigration
from ._records import AuditRecord as AuditRecord
from ._records import AuditRecordV1 as AuditRecordV1
from ._records import AuditRecordV2 as AuditRecordV2
from ._records import AuditRecordV3 as AuditRecordV3
from ._records import AuditRedaction as AuditRedaction
from ._records import AuditStatus as AuditStatus
from ._records import Decided as Decided
from ._records import Decision as Decision
from ._records import HandChange as HandChange
from ._records import HitSource as HitSource
from ._records import JournalFile as JournalFile
from ._records import JournalLine as JournalLine
from ._records import OwnerApproved as OwnerApproved
from ._records import OwnerEdit as OwnerEdit
from ._records import RecallRecord as RecallRecord
from ._records import Redacted as Redacted
from ._records import Status as Status
from ._records import Surface as Surface
from ._records import TextCommits as TextCommits
from ._records import TextField as TextField
from ._records import audit_commit_key as audit_commit_key
from ._records import audit_commits as audit_commits
from ._records import audit_forget_key as audit_forget_key
from ._records import audit_mac as audit_mac
from ._records import audit_signed_call as audit_signed_call
from ._records import audit_text_commit as audit_text_commit
from ._records import edit_id as edit_id
from ._records import unmatched_texts as unmatched_texts
from ._render import MENTION_ENTITY as MENTION_ENTITY
from ._render import code_block as code_block
from ._render import code_span as code_span
from ._render import for_markdown as for_markdown
from ._render import for_mattermost as for_mattermost
from ._render import for_terminal as for_terminal
from ._render import from_markdown as from_markdown
from ._render import from_terminal as from_terminal
from ._render import revealed as revealed
from ._secrets import read_token_file as read_token_file
from ._session import BASELINE_FILE as BASELINE_FILE
from ._session import LOG_FILE as LOG_FILE
from ._session import SESSION_LOG as SESSION_LOG
from ._session import SESSION_START as SESSION_START
from ._session import AssistantRecord as AssistantRecord
from ._session import Baseline as Baseline
from ._session import SessionRecord as SessionRecord
from ._session import ToolResultRecord as ToolResultRecord
from ._session import UserRecord as UserRecord
from ._session import damaged_label as damaged_label
from ._session import label_after as label_after
from ._session import read_baseline as read_baseline
from ._session import session_label as session_label
from ._sockets import BROKER_LOOP as BROKER_LOOP
from ._sockets import BROKER_MEMORY as BROKER_MEMORY
from ._sockets import LOOP_BROKER as LOOP_BROKER
from ._sockets import LOOP_MEMORY as LOOP_MEMORY
from ._sockets import MAX_SOCKET_PATH_BYTES as MAX_SOCKET_PATH_BYTES
from ._sockets import OWNER_BROKER as OWNER_BROKER
from ._sockets import OWNER_LOOP as OWNER_LOOP
from ._sockets import OWNER_MEMORY as OWNER_MEMORY
from ._sockets import SOCKETS as SOCKETS
from ._sockets import BrokerLoopRequest as BrokerLoopRequest
from ._sockets import BrokerMemoryRequest as BrokerMemoryRequest
from ._sockets import LoopBrokerRequest as LoopBrokerRequest
from ._sockets import LoopMemoryRequest as LoopMemoryRequest
from ._sockets import OwnerBrokerRequest as OwnerBrokerRequest
from ._sockets import OwnerLoopRequest as OwnerLoopRequest
from ._sockets import OwnerMemoryRequest as OwnerMemoryRequest
from ._sockets import Socket as Socket
from ._text import lower_first as lower_first
from ._time import TIME_FORMAT as TIME_FORMAT
from ._time import month_file as month_file
from ._time import utc_now as utc_now
from ._time import utc_stamp as utc_stamp
from ._tools import CORE_TOOLS as CORE_TOOLS
from ._tools import LOCAL_TOOLS as LOCAL_TOOLS
from ._tools import MAX_PATH_CHARS as MAX_PATH_CHARS
from ._tools import MAX_QUERY_CHARS as MAX_QUERY_CHARS
from ._tools import MAX_URL_CHARS as MAX_URL_CHARS
from ._tools import MEMORY_LIMIT as MEMORY_LIMIT
from ._tools import SOUL_LIMIT as SOUL_LIMIT
from ._tools import TOOLS as TOOLS
from ._tools import USER_LIMIT as USER_LIMIT
from ._tools import CallToolArgs as CallToolArgs
from ._tools import ClockArgs as ClockArgs
from ._tools import ConsolidateItem as ConsolidateItem
from ._tools import FindToolArgs as FindToolArgs
from ._tools import HttpFetchArgs as HttpFetchArgs
from ._tools import ListDirArgs as ListDirArgs
from ._tools import MemoryAction as MemoryAction
from ._tools import MemoryAdd as MemoryAdd
from ._tools import MemoryArgs as MemoryArgs
from ._tools import MemoryCall as MemoryCall
from ._tools import MemoryConsolidate as MemoryConsolidate
from ._tools import MemoryFile as MemoryFile
from ._tools import MemoryRemove as MemoryRemove
from ._tools import MemoryReplace as MemoryReplace
from ._tools import ReadFileArgs as ReadFileArgs
from ._tools import RecallArgs as RecallArgs
from ._tools import ToolArgsError as ToolArgsError
from ._tools import ToolSpec as ToolSpec
from ._tools import parse_memory_args as parse_memory_args
from ._tools import parse_recall_args as parse_recall_args

if TYPE_CHECKING:
    from ._client import Conversation as Conversation
    from ._client import call as call
    from ._client import open_call as open_call
    from ._connection import Connection as Connection
    from ._connection import Handler as Handler
    from ._connection import Peer as Peer
    from ._connection import PeerGone as PeerGone
    from ._connection import ServiceError as ServiceError
    from ._connection import serve_stream as serve_stream
    from ._forget_part import PLAN_DIR as PLAN_DIR
    from ._forget_part import ForgetPart as ForgetPart
    from ._forget_part import ForgetStore as ForgetStore
    from ._forget_part import Keep as Keep
    from ._forget_part import forget_text as forget_text
    from ._main import serve_main as serve_main
    from ._role import STILL_READING as STILL_READING
    from ._role import SUPERVISOR_FD_ENV as SUPERVISOR_FD_ENV
    from ._role import LogFormatter as LogFormatter
    from ._role import Role as Role
    from ._role import StartRole as StartRole
    from ._role import run_role as run_role
    from ._role import sd_notify as sd_notify
    from ._role import setup_logging as setup_logging
    from ._role import supervisor_fd as supervisor_fd
    from ._role import watch_signals as watch_signals
    from ._server import SocketPathError as SocketPathError
    from ._server import claim_socket_path as claim_socket_path
    from ._server import serve_unix as serve_unix
    from ._server import socket_answers as socket_answers
    from ._turn_client import TURN_IDLE_S as TURN_IDLE_S
    from ._turn_client import Turn as Turn
    from ._turn_client import TurnItem as TurnItem
    from ._turn_client import open_turn as open_turn

_LAZY = {
    "Conversation": "_client",
    "call": "_client",
    "open_call": "_client",
    "TURN_IDLE_S": "_turn_client",
    "Turn": "_turn_client",
    "TurnItem": "_turn_client",
    "open_turn": "_turn_client",
    "Connection": "_connection",
    "Handler": "_connection",
    "Peer": "_connection",
    "PeerGone": "_connection",
    "ServiceError": "_connection",
    "serve_stream": "_connection",
    "PLAN_DIR": "_forget_part",
    "ForgetPart": "_forget_part",
    "ForgetStore": "_forget_part",
    "Keep": "_forget_part",
    "forget_text": "_forget_part",
    "serve_main": "_main",
    "LogFormatter": "_role",
    "STILL_READING": "_role",
    "Role": "_role",
    "SUPERVISOR_FD_ENV": "_role",
    "supervisor_fd": "_role",
    "StartRole": "_role",
    "run_role": "_role",
    "sd_notify": "_role",
    "setup_logging": "_role",
    "watch_signals": "_role",
    "SocketPathError": "_server",
    "claim_socket_path": "_server",
    "serve_unix": "_server",
    "socket_answers": "_server",
}


def __getattr__(name: str) -> object:
    """The trio-using names, imported on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'proto' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
