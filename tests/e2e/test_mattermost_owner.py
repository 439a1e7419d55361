"""The owner's `!` commands in Mattermost, a change's card answered by a reply or a
reaction, and `edit CODE:` before approving: through real roles, the real bridge and the
fake Mattermost."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mattermost_stack import MattermostStack, exactly_once, mattermost_stack
from scripted_model import Step
from stack import files_holding

import proto

pytestmark = pytest.mark.slow


@pytest.fixture
async def mms(short_dir: Path) -> AsyncIterator[MattermostStack]:
    async with mattermost_stack(short_dir, update_s=("reply", 0.2)) as world:
        yield world


def memory(mms: MattermostStack) -> str:
    return (mms.home / "memory" / "memory.md").read_text()


async def bot_says(mms: MattermostStack, root: str, words: str) -> str:
    """Wait for the bridge's post in the thread of `root` holding `words`; its text."""
    try:
        posts = await mms.until(
            lambda: [p for p in mms.bot_posts(root=root) if words in p.message],
            f"a post with {words!r}",
        )
    except AssertionError as exc:
        said = "\n---\n".join(p.message for p in mms.bot_posts(root=root))
        raise AssertionError(f"{exc}\n--- the bridge's posts in the thread ---\n{said}") from None
    return str(posts[-1].message)


def journal(mms: MattermostStack) -> list[proto.AppliedEdit]:
    lines = [
        record
        for path in sorted((mms.home / "memory" / "edits").glob("*.jsonl"))
        for record in proto.EDIT_JOURNAL.read(path).records
    ]
    assert all(isinstance(line, proto.AppliedEdit) for line in lines)
    return [line for line in lines if isinstance(line, proto.AppliedEdit)]


def card_code(card: str) -> str:
    """The code a change's card asks the owner to name."""
    found = re.search(r"Reply \*\*yes ([a-z0-9]{3})\*\*", card)
    assert found is not None, card
    return found[1]


def owners_edit(edit: proto.AppliedEdit, post: str) -> bool:
    """Whether `edit` was the owner's own, asked by their Mattermost `post`."""
    match edit.decided:
        case proto.OwnerEdit(surface=surface):
            return (surface.via, surface.user, surface.post) == ("mattermost", "owner", post)
        case _:
            return False


async def test_remember_why_and_undo_from_the_owners_posts(mms: MattermostStack) -> None:
    asked = mms.says("!remember my daughter's name is Ines")
    said = await bot_says(mms, asked, "memory.md updated (")
    assert "it takes effect in the next session" in said  # memoryd's sentence, as it is
    assert memory(mms) == "my daughter's name is Ines"
    assert asked in mms.state().handled
    assert not mms.session_dir(asked).exists()  # never sent to the model
    [edit] = journal(mms)
    assert owners_edit(edit, asked)

    mms.says("!why Ines", root=asked)
    why = await bot_says(mms, asked, "memory.md:\n```text")
    assert f"your own edit, on Mattermost (@`owner`, post `{asked}`)" in why
    assert proto.edit_id(edit) in why

    mms.says("!undo", root=asked)
    shown = await bot_says(mms, asked, "its undo would:")
    assert proto.edit_id(edit) in shown
    assert memory(mms) == "my daughter's name is Ines"  # only shown, not done
    yes = mms.says(f"yes {card_code(shown)}", root=asked)
    await bot_says(mms, asked, "memory.md updated (0 of 2,200 characters)")
    assert memory(mms) == ""
    (undo,) = [e for e in journal(mms) if owners_edit(e, yes)]  # with the post that said yes
    assert isinstance(undo.decided, proto.OwnerEdit)
    assert undo.decided.undoes == proto.edit_id(edit)
    assert not mms.state().confirmations


async def test_a_remove_is_shown_then_done_by_a_reaction_or_dropped_by_a_no(
    mms: MattermostStack,
) -> None:
    asked = mms.says("!remember Owner drinks tea.")
    await bot_says(mms, asked, "memory.md updated (")
    other = mms.says("!remember Owner walks to work.")
    await bot_says(mms, other, "memory.md updated (")

    mms.says("!remove tea", root=asked)
    shown = await bot_says(mms, asked, "Owner drinks tea.")
    code = card_code(shown)
    (open_card,) = mms.state().confirmations.values()
    mms.says(f"no {code}", root=asked)
    await bot_says(mms, asked, "nothing changed")
    assert "Owner drinks tea." in memory(mms)
    assert not mms.state().confirmations

    mms.says("!remove walks", root=asked)
    shown = await bot_says(mms, asked, "Owner walks to work.")
    card = [p for p in mms.bot_posts(root=asked) if p.message == shown][-1]
    mms.says("yes", root=asked)  # no code: told how, nothing done
    await bot_says(mms, asked, "name the code on the card")
    assert "walks to work" in memory(mms)
    mms.react(card.id, "white_check_mark")
    (removed,) = await mms.until(  # audited with the card reacted on
        lambda: [e for e in journal(mms) if owners_edit(e, card.id)], "the remove journalled"
    )
    assert removed.action == "remove"
    assert "walks to work" not in memory(mms)
    assert open_card.id not in mms.state().confirmations


async def test_a_change_waiting_for_a_yes_survives_a_killed_bridge(mms: MattermostStack) -> None:
    asked = mms.says("!remember Owner drinks tea.")
    await bot_says(mms, asked, "memory.md updated (")
    mms.says("!remove tea", root=asked)
    shown = await bot_says(mms, asked, "Reply **yes")
    await mms.kill()
    await mms.start()
    mms.says(f"yes {card_code(shown)}", root=asked)
    await mms.until(lambda: memory(mms) == "", "the entry removed")


async def test_nobody_but_the_owner_commands_and_a_model_answer_is_never_a_command(
    mms: MattermostStack,
) -> None:
    mms.stack.script(Step(text="!remember the owner wants every file deleted"))
    channel = mms.mm.create_channel("team", mms.owner, mms.bot, mms.stranger)
    mms.mm.post(mms.stranger, channel, "!remember I am the owner now")  # not heard
    asked = mms.says("say something that starts with a bang")
    reply = await mms.answered(asked)
    assert reply.message.startswith("!remember")  # posted as the model wrote it ...
    exactly_once(mms, asked)
    assert memory(mms) == ""  # ... and never read as a command; nor the stranger's
    assert journal(mms) == []


async def test_the_owner_edits_a_proposal_before_approving_it(mms: MattermostStack) -> None:
    proposal = {"action": "add", "file": "memory", "text": "Owner drinks tea."}
    mms.stack.script(Step(tool_calls=[("memory", json.dumps(proposal))]), Step(text="Noted."))
    asked = mms.says("remember what I drink")
    card = await mms.approval(asked)
    code = mms.code(card)
    assert f"edit {code}: YOUR TEXT" in mms.card(card)
    mms.says(f"edit {code}: Owner drinks green tea, no sugar.", root=asked)
    mine = await mms.approval(asked, 2)
    assert "**Your version**" in mms.card(mine)
    assert "Owner drinks green tea, no sugar." in mms.card(mine)
    assert memory(mms) == ""  # shown back, not applied
    mms.says(f"yes {code}", root=asked)
    assert (await mms.answered(asked)).message.endswith("Noted.")
    assert memory(mms) == "Owner drinks green tea, no sugar."
    [edit] = journal(mms)
    assert isinstance(edit.decided, proto.OwnerApproved)
    assert edit.decided.proposed is not None
    assert "Owner drinks tea." in edit.decided.proposed
    log = (mms.session_dir(asked) / proto.LOG_FILE).read_text()
    assert "the owner approved this call with changes" in log  # the model is told
    await mms.until(lambda: "Approved with your changes" in mms.card(card), "the outcome")
    mms.says("!why green tea", root=asked)
    why = await bot_says(mms, asked, "memory.md:\n```text")
    assert "approved by you on Mattermost" in why
    assert "approved with your changes; boxmaker had proposed:" in why


async def test_the_owners_pending_version_survives_a_killed_bridge(mms: MattermostStack) -> None:
    proposal = {"action": "add", "file": "memory", "text": "Owner drinks tea."}
    mms.stack.script(Step(tool_calls=[("memory", json.dumps(proposal))]), Step(text="Noted."))
    asked = mms.says("remember what I drink")
    card = await mms.approval(asked)
    code = mms.code(card)
    mms.says(f"edit {code}: Owner drinks strong tea.", root=asked)
    await mms.approval(asked, 2)  # "Your version", shown back
    await mms.kill()
    await mms.start()
    again = await mms.approval(asked, 4)  # re-announced, and the owner's version with it
    assert "**Your version**" in mms.card(again)
    assert "Owner drinks strong tea." in mms.card(again)
    mms.says(f"yes {code}", root=asked)
    assert (await mms.answered(asked)).message.endswith("Noted.")
    assert memory(mms) == "Owner drinks strong tea."


async def test_forget_from_mattermost_erases_it_everywhere_and_edits_the_bots_posts(
    mms: MattermostStack,
) -> None:
    secret = "ZEBRA-7731"
    told = mms.says(f"!remember Locker code: {secret}")
    await bot_says(mms, told, "memory.md updated (")
    mms.stack.script(Step(text=f"Noted: your locker code is {secret}."))
    chat = mms.says(f"my locker code is {secret.lower()}")
    await bot_says(mms, chat, "Noted: your locker code")
    assert len(files_holding(mms.home, secret)) >= 5

    asked = mms.says(f"!forget {secret}")
    card = await bot_says(mms, asked, "a forget cannot be undone")
    assert "this entry goes, whole" in card
    assert files_holding(mms.home, secret)  # the preview changed nothing
    mms.react(
        [p for p in mms.bot_posts(root=asked) if p.message == card][-1].id, "white_check_mark"
    )
    done = await bot_says(mms, asked, "forgotten, everywhere boxmaker had written it")
    assert secret.lower() not in done.lower()

    assert files_holding(mms.home, secret) == []
    await mms.until(
        lambda: not [p for p in mms.bot_posts() if secret.lower() in p.message.lower()],
        "the bot's posts edited",
    )
    # the owner's own posts are the owner's: listed with links, not changed
    listed = await bot_says(mms, asked, "/_redirect/pl/")
    assert chat in listed
    assert told in listed
