"""The memory entry format and the memory edit rules (spec §3-§5); pure functions, no I/O.

memory.md and user.md are lists of entries (`parse`, `render`, `chars`); an approved edit
of the memory tool is applied with `apply_edit`, which returns the new entries and the
entries moved to archive.md, or raises `EditRefused` with the sentence for the model;
`inverse` is the edit that undoes an applied one. The
memory block (`render_block`) and archive.md's records (`archive_record`, `parse_archive`)
are rendered and read here too; memoryd does the reading and writing of files.
"""

from ._archive import ARCHIVE_HEADER_PATTERN as ARCHIVE_HEADER_PATTERN
from ._archive import ArchiveEntry as ArchiveEntry
from ._archive import archive_record as archive_record
from ._archive import is_archive_header as is_archive_header
from ._archive import parse_archive as parse_archive
from ._block import BLOCK_START as BLOCK_START
from ._block import memory_block_of as memory_block_of
from ._block import render_block as render_block
from ._block import soul_text as soul_text
from ._errors import EditRefused as EditRefused
from ._errors import EntriesError as EntriesError
from ._errors import ParseError as ParseError
from ._errors import RefusalCode as RefusalCode
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
from ._limits import limit_for as limit_for
from ._rules import EditOutcome as EditOutcome
from ._rules import apply_edit as apply_edit
from ._sentences import over_limit as over_limit
from ._sentences import quote as quote
from ._sentences import updated as updated

__all__ = [
    "ARCHIVE_HEADER_PATTERN",
    "BLOCK_START",
    "MEMORY_LIMIT",
    "SEPARATOR_LINE",
    "SOUL_LIMIT",
    "USER_LIMIT",
    "ArchiveEntry",
    "EditOutcome",
    "EditRefused",
    "EntriesError",
    "ParseError",
    "RefusalCode",
    "apply_edit",
    "archive_record",
    "chars",
    "check_entry",
    "file_name",
    "inverse",
    "is_archive_header",
    "is_entry",
    "is_separator",
    "limit_for",
    "memory_block_of",
    "over_limit",
    "parse",
    "parse_archive",
    "quote",
    "render",
    "render_block",
    "soul_text",
    "updated",
    "with_text",
]
