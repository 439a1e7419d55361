"""Issue 24: a place in the channel no post can push into the future, an approval no model
text can imitate, and an approval no plugin's canned answer can decide."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mattermost_stack import MattermostStack, exactly_once, mattermost_stack
from scripted_model import Step

pytestmark = pytest.mark.slow

DAY_MS = 86_400_000
EDIT = json.dumps({"action": "add", "file": "memory", "text": "Owner drinks green tea."})


@pytest.fixture
async def mms(short_dir: Path) -> AsyncIterator[MattermostStack]:
    async with mattermost_stack(
        short_dir, heartbeat_s=("server", 1.0), update_s=("reply", 0.2)
    ) as world:
        yield world


async def test_a_post_dated_days_ahead_does_not_hide_the_posts_made_after_it(
    mms: MattermostStack,
) -> None:
    # Mattermost keeps a post's create_at from a session with manage_system: the owner is
    # a system admin here, as on many one-person servers.
    mms.mm.store.users[mms.owner.id].roles = "system_admin system_user"
    mms.stack.script(Step(text="Noted, time traveller."), Step(text="Answered anyway."))
    future = int(time.time() * 1000) + 3 * DAY_MS
    dated = str(mms.mm.post(mms.owner, mms.dm, "from the future", create_at=future)["id"])
    assert mms.mm.store.posts[dated].create_at == future  # the fake kept it, as Mattermost does
    assert (await mms.answered(dated)).message == "Noted, time traveller."  # read as any other
    place = mms.state().channels[mms.dm]
    assert place < future - 2 * DAY_MS  # the server's time, not the post's claim
    await mms.mm.go_down()  # the stream drops; the owner posts meanwhile (another node)
    meanwhile = mms.says("made while the bridge was away")
    await mms.mm.come_up()
    assert (await mms.answered(meanwhile)).message == "Answered anyway."
    exactly_once(mms, dated, meanwhile)
    assert f"post {dated} is dated" in mms.log()
