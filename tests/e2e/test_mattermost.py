"""The memory design's device tests on the owner's Mattermost, end to end.

Real roles and a real mattermostd process, the fake Mattermost server applying the real
server's rules, the scripted model: the owner posts and reacts as in the web app; the
bridge answers in threads and asks for approvals there.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from fakes.web import serving_page
from mattermost_stack import MattermostStack, mattermost_stack
from scripted_model import Step

import proto
from proto import Baseline

pytestmark = pytest.mark.slow


@pytest.fixture
async def mms(short_dir: Path) -> AsyncIterator[MattermostStack]:
    async with mattermost_stack(short_dir, update_s=("reply", 0.2)) as world:
        yield world


def records(world: MattermostStack, root: str) -> list[dict[str, Any]]:
    text = (world.session_dir(root) / proto.LOG_FILE).read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def tool_results(world: MattermostStack, root: str) -> list[dict[str, Any]]:
    return [r for r in records(world, root) if r["type"] == "tool_result"]


def baseline(world: MattermostStack, root: str) -> Baseline:
    raw = (world.session_dir(root) / proto.BASELINE_FILE).read_bytes()
    return msgspec.json.decode(raw, type=Baseline)


def memory_call(args: dict[str, Any]) -> Step:
    return Step(tool_calls=[("memory", json.dumps(args))])


def no_mentions(world: MattermostStack) -> None:
    """Mattermost's own rules find no mention in anything the bridge posted."""
    for post in world.mm.channel_posts(world.dm):
        if post.user_id == world.bot.id:
            found = world.mm.mentions(post)
            assert not found, (post.message, found)


async def test_the_baseline_of_a_thread_is_the_starter_soul_and_counted(
    mms: MattermostStack, capsys: pytest.CaptureFixture[str]
) -> None:
    mms.stack.script(Step(text="Hello! How can I help?"))
    root = mms.says("hello")
    reply = await mms.answered(root)
    assert reply.message == "Hello! How can I help?"
    assert reply.root_id == root
    session = baseline(mms, root)
    assert session.session == f"mm-{root}"
    soul = (mms.home / "memory" / "soul.md").read_text().strip()
    assert soul in session.system
    preview = await proto.call(
        mms.stack.socket(proto.OWNER_LOOP), proto.BaselinePreview(), proto.BaselinePreviewReply
    )
    assert preview.system == session.system  # what a new thread starts with, byte for byte
    text = session.system + json.dumps(session.tools)
    first = mms.stack.model.request_json(0)
    assert first["messages"][0]["content"] == session.system
    tokens = -(-len(text) // 3)  # a bound: English and JSON average more than 3 a token
    with capsys.disabled():
        print(f"\ndevice 1: baseline of a new thread {len(text):,} characters, ≤ {tokens:,} tokens")
    assert tokens <= 3000
    no_mentions(mms)


async def test_a_fact_told_in_one_thread_is_recalled_in_another(mms: MattermostStack) -> None:
    mms.stack.script(Step(text="Noted: the launch window moved to Thursday."))
    told = mms.says("FYI the launch window moved to Thursday.")
    await mms.answered(told)

    mms.stack.script(
        Step(tool_calls=[("recall", '{"query": "when is the launch window?"}')]),
        Step(text="It moved to Thursday."),
    )
    asked = mms.says("When is the launch?")
    reply = await mms.answered(asked)
    [result] = tool_results(mms, asked)
    assert f"session mm-{told[:6]}" in result["content"]
    assert "launch window moved to Thursday" in result["content"]
    assert "tool `recall`" in reply.message
    assert reply.message.endswith("It moved to Thursday.")
    no_mentions(mms)


async def test_an_add_approved_in_mattermost_reaches_a_new_thread_not_the_asking_one(
    mms: MattermostStack,
) -> None:
    fact = "Owner's name is Ada; she is @ada on chat."
    mms.stack.script(
        memory_call({"action": "add", "file": "user", "text": fact}),
        Step(text="Proposed."),
    )
    asking = mms.says("My name is Ada.")
    approval = await mms.approval(asking)
    # the exact bytes, in a block nothing can close; the @ cannot mention anyone
    assert json.dumps(fact)[1:-1] in mms.card(approval)
    assert not mms.mm.mentions(approval)
    yes = mms.says(f"yes {mms.code(approval)}", root=asking)
    await mms.answered(asking)
    assert (mms.home / "memory" / "user.md").read_text() == fact
    # the approval post is edited by a task of its own, maybe after the reply
    await mms.until(
        lambda: "The call ran." in mms.card(approval),
        "the approval's outcome",
    )
    decided = mms.card(approval)
    assert "**Approved** by `owner` in Mattermost (a reply)" in decided
    assert "The call ran." in decided
    assert yes in mms.state().handled  # the "yes" was a decision, not a message
    assert not any(r["type"] == "user" and "yes" in r["content"] for r in records(mms, asking))

    mms.stack.script(Step(text="Hi Ada."))
    fresh = mms.says("Hello again")
    await mms.answered(fresh)
    assert fact in baseline(mms, fresh).system
    assert fact not in baseline(mms, asking).system
    no_mentions(mms)


async def test_a_consolidate_approved_by_reaction_moves_an_entry_recall_then_finds(
    mms: MattermostStack,
) -> None:
    fact = "Owner prefers answers in UTC."
    mms.stack.script(
        memory_call({"action": "add", "file": "memory", "text": fact}),
        Step(text="Proposed."),
        memory_call(
            {"action": "consolidate", "file": "memory", "entries": [{"old": fact, "move": True}]}
        ),
        Step(text="Archived."),
    )
    root = mms.says("Always use UTC with me.")
    first = await mms.approval(root)
    mms.react(first.id, "white_check_mark")
    await mms.answered(root)
    assert (mms.home / "memory" / "memory.md").read_text() == fact

    tidy = mms.says("Tidy your memory.", root=root)
    second = await mms.approval(root, 2)
    mms.react(second.id, "white_check_mark")
    await mms.answered(tidy)
    assert (mms.home / "memory" / "memory.md").read_text() == ""

    mms.stack.script(
        Step(tool_calls=[("recall", '{"query": "UTC answers"}')]),
        Step(text="You prefer UTC."),
    )
    later = mms.says("What time zone do I like?")
    await mms.answered(later)
    [found] = tool_results(mms, later)
    assert found["content"].startswith("[1] archive.md, moved ")
    assert "Owner prefers answers in UTC." in found["content"]
    no_mentions(mms)


@pytest.fixture
def web_page() -> Iterator[str]:
    with serving_page(
        b"<html><body>The codeword for the vault is zebra-42. @all look!</body></html>"
    ) as address:
        yield address


async def test_a_hit_from_a_session_that_read_a_page_comes_back_untrusted(
    mms: MattermostStack, web_page: str
) -> None:
    (mms.home / "grants" / "local-web.toml").write_text(
        'tool = "http_fetch"\nmode = "auto"\nmax_taint = "private"\nresult_class = "public"\n'
        f'untrusted = true\n[constraints]\nhosts = ["{web_page}"]\n'
    )
    await trio.to_thread.run_sync(mms.stack.restart, "brokerd")
    fetch = {"name": "http_fetch", "arguments": {"url": f"http://{web_page}/notes"}}
    mms.stack.script(
        Step(tool_calls=[("call_tool", json.dumps(fetch))]),
        Step(text="The page says the vault codeword is zebra-42. @all look!"),
    )
    reader = mms.says("Read my notes page.")
    reply = await mms.answered(reader)
    assert "(public, untrusted)" in reply.message or "(untrusted, public)" in reply.message
    assert "&#64;all" in reply.message  # the model's @all reaches no one

    mms.stack.script(
        Step(tool_calls=[("recall", '{"query": "vault codeword"}')]),
        Step(text="Found it."),
        memory_call({"action": "add", "file": "memory", "text": "Vault: zebra-42."}),
        Step(text="Proposed."),
    )
    recaller = mms.says("What was the vault codeword?")
    await mms.answered(recaller)
    [recalled] = tool_results(mms, recaller)
    assert "· untrusted" in recalled["content"]
    assert recalled["untrusted"] is True
    remember = mms.says("Remember the codeword.", root=recaller)
    approval = await mms.approval(recaller)
    assert "this session has read untrusted content" in mms.card(approval)
    mms.says(f"no {mms.code(approval)}, not from a web page", root=recaller)
    await mms.answered(remember)
    assert "zebra" not in (mms.home / "memory" / "memory.md").read_text()
    no_mentions(mms)
