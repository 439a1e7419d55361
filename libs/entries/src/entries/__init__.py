"""The memory entry format and the memory edit rules; pure functions, no I/O.

memory.md and user.md are lists of entries (`parse`, `render`, `chars`); an approved edit
of the memory tool is applied with `apply_edit`, which returns the new entries and the
entries moved to archive.md, or raises `EditRefused` with the sentence for the model;
`inverse` is the edit that undoes an applied one. The
memory block (`render_block`) and archive.md's records (`archive_record`, `parse_archive`)
are rendered and read here too; memoryd does the reading and writing of files.

The owner's commands (`/remember` in the chat, `!remember` in Mattermost) are here too,
so they mean the same on every surface: their grammar (`parse_command`, `COMMANDS`), how
they run as sans-IO steps (`run_command`, `apply_proposal`), and what the owner is told
(`Answer`, rendered `to_terminal` or `to_markdown`). So is a recall's answer as the
owner reads it, each hit with the command that opens it (`recall_answer`, `parse_at`).
"""

from ._answer import Answer as Answer
from ._answer import Block as Block
from ._answer import Line as Line
from ._answer import Quote as Quote
from ._answer import Strong as Strong
from ._answer import Table as Table
from ._answer import line as line
from ._answer import to_markdown as to_markdown
from ._answer import to_plain as to_plain
from ._answer import to_terminal as to_terminal
from ._archive import ARCHIVE_HEADER_PATTERN as ARCHIVE_HEADER_PATTERN
from ._archive import ArchiveEntry as ArchiveEntry
from ._archive import archive_record as archive_record
from ._archive import is_archive_header as is_archive_header
from ._archive import parse_archive as parse_archive
from ._block import BLOCK_START as BLOCK_START
from ._block import memory_block_of as memory_block_of
from ._block import render_block as render_block
from ._block import soul_text as soul_text
from ._commands import COMMANDS as COMMANDS
from ._commands import CommandHelp as CommandHelp
from ._commands import Forget as Forget
from ._commands import ForModel as ForModel
from ._commands import Help as Help
from ._commands import NotACommand as NotACommand
from ._commands import OwnerCommand as OwnerCommand
from ._commands import Parsed as Parsed
from ._commands import Remember as Remember
from ._commands import Remove as Remove
from ._commands import Replace as Replace
from ._commands import ShowMemory as ShowMemory
from ._commands import Sigil as Sigil
from ._commands import Undo as Undo
from ._commands import Usage as Usage
from ._commands import Where as Where
from ._commands import Why as Why
from ._commands import command_for as command_for
from ._commands import help_rows as help_rows
from ._commands import parse_command as parse_command
from ._commands import part_problem as part_problem
from ._desk import DECLINED as DECLINED
from ._desk import Ask as Ask
from ._desk import Confirm as Confirm
from ._desk import ForgetProposal as ForgetProposal
from ._desk import Proposal as Proposal
from ._desk import Steps as Steps
from ._desk import apply_proposal as apply_proposal
from ._desk import describe_edit as describe_edit
from ._desk import describe_why as describe_why
from ._desk import run_command as run_command
from ._desk import who_decided as who_decided
from ._desk import yes_no as yes_no
from ._errors import EditRefused as EditRefused
from ._errors import EntriesError as EntriesError
from ._errors import ParseError as ParseError
from ._errors import RefusalCode as RefusalCode
from ._forget import describe_progress as describe_progress
from ._format import SEPARATOR_LINE as SEPARATOR_LINE
from ._format import chars as chars
from ._format import check_entry as check_entry
from ._format import is_entry as is_entry
from ._format import is_separator as is_separator
from ._format import parse as parse
from ._format import render as render
from ._inverse import inverse as inverse
from ._inverse import with_text as with_text
from ._limits import MEMORY_LIMIT as MEMORY_LIMIT
from ._limits import SOUL_LIMIT as SOUL_LIMIT
from ._limits import USER_LIMIT as USER_LIMIT
from ._limits import file_name as file_name
from ._limits import file_of as file_of
from ._limits import limit_for as limit_for
from ._recall import ARCHIVE_PART_CHARS as ARCHIVE_PART_CHARS
from ._recall import archive_part as archive_part
from ._recall import at_text as at_text
from ._recall import minute as minute
from ._recall import parse_at as parse_at
from ._recall import recall_answer as recall_answer
from ._recall import said_by as said_by
from ._rules import EditOutcome as EditOutcome
from ._rules import apply_edit as apply_edit
from ._sentences import over_limit as over_limit
from ._sentences import quote as quote
from ._sentences import updated as updated

__all__ = [
    "ARCHIVE_HEADER_PATTERN",
    "ARCHIVE_PART_CHARS",
    "BLOCK_START",
    "COMMANDS",
    "MEMORY_LIMIT",
    "SEPARATOR_LINE",
    "SOUL_LIMIT",
    "USER_LIMIT",
    "Answer",
    "ArchiveEntry",
    "Ask",
    "Block",
    "CommandHelp",
    "Confirm",
    "EditOutcome",
    "EditRefused",
    "EntriesError",
    "ForModel",
    "Forget",
    "ForgetProposal",
    "Help",
    "Line",
    "NotACommand",
    "OwnerCommand",
    "ParseError",
    "Parsed",
    "Proposal",
    "Quote",
    "RefusalCode",
    "Remember",
    "Remove",
    "Replace",
    "ShowMemory",
    "Sigil",
    "Steps",
    "Strong",
    "Table",
    "Undo",
    "Usage",
    "Where",
    "Why",
    "apply_edit",
    "apply_proposal",
    "archive_part",
    "archive_record",
    "at_text",
    "chars",
    "check_entry",
    "command_for",
    "describe_edit",
    "describe_progress",
    "describe_why",
    "file_name",
    "file_of",
    "help_rows",
    "inverse",
    "is_archive_header",
    "is_entry",
    "is_separator",
    "limit_for",
    "line",
    "memory_block_of",
    "minute",
    "over_limit",
    "parse",
    "parse_archive",
    "parse_at",
    "parse_command",
    "part_problem",
    "quote",
    "recall_answer",
    "render",
    "render_block",
    "run_command",
    "said_by",
    "soul_text",
    "to_markdown",
    "to_plain",
    "to_terminal",
    "updated",
    "who_decided",
    "with_text",
    "yes_no",
]
