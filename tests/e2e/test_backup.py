"""A backup of a running home, restored elsewhere, holds everything (docs/your-data.md).

Real role processes, a scripted model over HTTP. The home gets an owner's memory edit
(audited), a session with a message recall can find, then `bxctl backup` runs while the
roles run. The original home is then deleted, the copy moved to a new path and started:
the session resumes with its history, the audit verifies, recall answers, memory holds
the entry.
"""

from __future__ import annotations

import json
import os
import shutil
from functools import partial
from pathlib import Path

import trio
from scripted_model import Step, serve_scripted_model
from stack import ROLES, Stack, running_stack, say

import proto
from bxctl import app
from proto import SessionOpen, SessionOpened

CAP_S = 60
ENTRY = "Prefers answers in UTC"
MESSAGE = "the Heron launch moved to Friday"
ME = proto.Surface(via="bxctl", uid=os.getuid())


async def bxctl(*argv: str) -> object:
    with trio.fail_after(CAP_S):
        return await trio.to_thread.run_sync(partial(app, list(argv), result_action="return_value"))


async def test_a_backup_taken_while_running_restores_elsewhere_whole(short_dir: Path) -> None:
    backup = short_dir / "copy"
    with running_stack(short_dir / "a") as original:
        with trio.fail_after(CAP_S):
            await proto.call(
                original.socket(proto.OWNER_BROKER),
                proto.MemoryEdit(
                    arguments=json.dumps({"action": "add", "file": "memory", "text": ENTRY}),
                    surface=ME,
                ),
                proto.ToolResponse,
            )
            opened = await proto.call(
                original.socket(proto.OWNER_LOOP), SessionOpen(origin="e2e"), SessionOpened
            )
        original.script(Step(text="Noted."))
        await say(original, opened.session, MESSAGE)
        assert await bxctl("backup", str(backup), "--home", str(original.home)) == 0
    assert (backup.stat().st_mode & 0o777) == 0o700
    assert not (backup / "run").exists()
    shutil.rmtree(short_dir / "a")  # nothing of the original is left to lean on

    home = short_dir / "b" / "home"
    home.parent.mkdir()
    os.replace(backup, home)
    with serve_scripted_model(Step(text="Friday, as you said.")) as model:
        assert await bxctl("config", "set", "model.url", model.url, "--home", str(home)) == 0
        restored = Stack(home, model)
        try:
            for role in ROLES:
                restored.start(role)
            await say(restored, opened.session, "when is the launch?")
            sent = model.requests[-1].decode()
            assert MESSAGE in sent  # the session resumed with its history
            assert ENTRY in sent  # and its baseline's memory block

            with trio.fail_after(CAP_S):
                verified = await proto.call(
                    restored.socket(proto.OWNER_BROKER), proto.AuditVerify(), proto.AuditVerified
                )
                recalled = await proto.call(
                    restored.socket(proto.OWNER_MEMORY),
                    proto.RecallQuery(query="Heron launch"),
                    proto.ToolResponse,
                )
                block = await proto.call(
                    restored.socket(proto.OWNER_MEMORY),
                    proto.MemoryBlock(),
                    proto.MemoryBlockReply,
                )
            assert verified.ok, verified.broken_at
            assert verified.records >= 1  # the owner's edit, at least
            assert "Friday" in recalled.content, recalled.content
            assert ENTRY in block.text
        finally:
            for role in reversed(ROLES):
                if role in restored.processes:
                    restored.stop(role)
