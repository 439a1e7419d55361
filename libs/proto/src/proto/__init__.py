"""boxmaker's shared protocol: frames, message kinds, labels, ids, sockets and escaping.

Every role imports this package and nothing of another role.
"""

from ._client import Call as Call
from ._client import RemoteError as RemoteError
from ._client import Unreachable as Unreachable
from ._client import call as call
from ._client import open_call as open_call
from ._codec import HEADER_BYTES as HEADER_BYTES
from ._codec import MAX_FRAME as MAX_FRAME
from ._codec import FrameTooLarge as FrameTooLarge
from ._codec import IncompleteFrame as IncompleteFrame
from ._codec import PeerClosed as PeerClosed
from ._codec import ProtocolError as ProtocolError
from ._codec import decode_body as decode_body
from ._codec import encode_frame as encode_frame
from ._codec import read_frame as read_frame
from ._codec import write_frame as write_frame
from ._escape import escape as escape
from ._escape import unescape as unescape
from ._ids import SESSION_ID_PATTERN as SESSION_ID_PATTERN
from ._ids import BadSessionId as BadSessionId
from ._ids import SessionId as SessionId
from ._ids import check_session_id as check_session_id
from ._label import Class as Class
from ._label import Label as Label
from ._messages import *  # noqa: F403  (every kind; the list is _messages.__all__)
from ._role import DEFAULT_HOME as DEFAULT_HOME
from ._role import resolve_home as resolve_home
from ._role import run_role as run_role
from ._role import sd_notify as sd_notify
from ._role import setup_logging as setup_logging
from ._role import watch_signals as watch_signals
from ._server import Connection as Connection
from ._server import Handler as Handler
from ._server import ServiceError as ServiceError
from ._server import SocketPathError as SocketPathError
from ._server import claim_socket_path as claim_socket_path
from ._server import serve_unix as serve_unix
from ._session import AssistantRecord as AssistantRecord
from ._session import Baseline as Baseline
from ._session import SessionRecord as SessionRecord
from ._session import ToolResultRecord as ToolResultRecord
from ._session import UserRecord as UserRecord
from ._sockets import BROKER_MEMORY as BROKER_MEMORY
from ._sockets import LOOP_BROKER as LOOP_BROKER
from ._sockets import LOOP_MEMORY as LOOP_MEMORY
from ._sockets import MAX_SOCKET_PATH_BYTES as MAX_SOCKET_PATH_BYTES
from ._sockets import OWNER_BROKER as OWNER_BROKER
from ._sockets import OWNER_LOOP as OWNER_LOOP
from ._sockets import OWNER_MEMORY as OWNER_MEMORY
from ._sockets import SOCKETS as SOCKETS
from ._sockets import Socket as Socket
from ._tools import MAX_QUERY_CHARS as MAX_QUERY_CHARS
from ._tools import ConsolidateItem as ConsolidateItem
from ._tools import MemoryAdd as MemoryAdd
from ._tools import MemoryArgs as MemoryArgs
from ._tools import MemoryConsolidate as MemoryConsolidate
from ._tools import MemoryFile as MemoryFile
from ._tools import MemoryRemove as MemoryRemove
from ._tools import MemoryReplace as MemoryReplace
from ._tools import RecallArgs as RecallArgs
from ._tools import ToolArgsError as ToolArgsError
from ._tools import parse_memory_args as parse_memory_args
from ._tools import parse_recall_args as parse_recall_args
