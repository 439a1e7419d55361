"""Secrets the owner puts in files: read only from a file nobody else can read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ._config import NeedsOwner

__all__ = ["read_token_file"]


def read_token_file(path: Path) -> str:
    """An access token from its file, which only its owner may read (mode 0600 or 0400).

    Used by mattermostd (the bot's token) and by `bxctl init`, which checks it first.
    Raises `NeedsOwner` naming what to fix; the token itself is never in a message.
    """
    hint = "(runbook: mattermost-token-file)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NeedsOwner(f"the token file {path} does not exist {hint}") from None
    except OSError as exc:
        raise NeedsOwner(f"cannot read the token file {path}: {exc.strerror} {hint}") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NeedsOwner(f"the token file {path} is not a file {hint}")
        if mode & 0o077:
            raise NeedsOwner(
                f"the token file {path} can be read by others (mode {stat.S_IMODE(mode):04o}); "
                f"run `chmod 600 {path}` {hint}"
            )
        raw = file.read(4096)
    try:
        token = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        token = ""
    if not token or any(not (char.isalnum() or char in "-_.") for char in token):
        raise NeedsOwner(
            f"the token file {path} does not hold a Mattermost access token (one line of "
            f"letters and digits) {hint}"
        )
    return token
