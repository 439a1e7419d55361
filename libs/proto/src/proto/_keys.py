"""Secret keys and the HMACs made with them: approval tokens and the audit chain.

A key is 32 random bytes, kept hex-encoded in a file of mode 0600 under `{home}/keys/`:

* `approval.key`, read by brokerd and memoryd: brokerd signs each approved call with it
  (`approval_token`), memoryd checks the token before it writes memory.
* `audit.key`, brokerd's alone: the audit log's chain and its head are HMACs under it.

Where the roles run as their own users (docs/install.md), another user cannot read a key,
so cannot forge a token or re-chain the audit log. Under one user, they protect against
other programs that only reach the sockets, not against the owner's own account.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

from ._durable import file_mode, fsync_dir

__all__ = [
    "APPROVAL_KEY",
    "AUDIT_KEY",
    "KEY_BYTES",
    "KeyUnusable",
    "approval_token",
    "audit_head_mac",
    "ensure_key",
    "read_key",
    "sign",
]

KEY_BYTES = 32

APPROVAL_KEY = "keys/approval.key"
"""The approval key's default path under the home."""
AUDIT_KEY = "keys/audit.key"
"""The audit key's default path under the home."""


class KeyUnusable(Exception):
    """A key file that cannot be used: unreadable, malformed, or open to other users."""


def read_key(path: Path) -> bytes:
    """The key in `path`; `KeyUnusable` saying why when it cannot be used."""
    try:
        st = path.stat()
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise KeyUnusable(f"the key {path} is missing (bxctl init creates it)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyUnusable(f"the key {path} cannot be read: {exc}") from None
    if stat.S_IMODE(st.st_mode) & 0o007:
        raise KeyUnusable(f"the key {path} is readable by other users (chmod 600 or 640 it)")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise KeyUnusable(f"the key {path} is not hex") from None
    if len(key) != KEY_BYTES:
        raise KeyUnusable(f"the key {path} holds {len(key)} bytes, not {KEY_BYTES}")
    return key


def ensure_key(path: Path, *, shared: bool = False) -> bytes:
    """The key in `path`, created (random) when missing; never overwritten.

    A new key is 0600; a `shared` one (the approval key, which memoryd reads too) is 0640
    in a directory the installer gave to a group (`file_mode`).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.exists():
        return read_key(path)
    mode = file_mode(path.parent) if shared else 0o600
    # Written whole under a temporary name, then linked into place: two roles started side
    # by side never read a key file the other has made but not yet written.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(KEY_BYTES) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # the other one linked first: use it
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    fsync_dir(path.parent)
    return read_key(path)


def sign(key: bytes, *parts: str | bytes) -> str:
    """HMAC-SHA256 of `parts` under `key`, hex.

    Each part is length-prefixed, so no part can borrow bytes from its neighbour.
    """
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        mac.update(len(data).to_bytes(8, "big"))
        mac.update(data)
    return mac.hexdigest()


def approval_token(
    key: bytes, *, approval: str, session: str, call: str, tool: str, arguments: str
) -> str:
    """The token brokerd sends with an approved call: binds the approval to exactly it."""
    return sign(key, "boxmaker approval v1", approval, session, call, tool, arguments)


def audit_head_mac(key: bytes, *, records: int, last: str, broken: str | None) -> str:
    """The MAC of `audit/head`: binds the count to the last record's MAC (and any break).

    Without it, a log cut after record N could be given the head (N, record N's `mac`),
    which the log itself shows. (An audit record's own MAC is `proto.audit_mac`.)
    """
    found = "intact" if broken is None else f"broken: {broken}"
    return sign(key, "boxmaker audit head v1", str(records), last, found)
