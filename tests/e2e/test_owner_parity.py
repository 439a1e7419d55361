"""One table of the owner's commands, run through both surfaces against real roles.

The terminal's chat (`/…`, answered y/N on its own input) and the Mattermost bridge
(`!…`, answered on a card with `yes CODE` / `no CODE`) must mean the same thing: after
each step, both homes hold the same memory.md and user.md and the same journal, and both
answers say the same words (a terminal prints outside text as it is, Mattermost in code
spans: the words are compared without the backticks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import msgspec
import pytest
import trio
from mattermost_stack import MattermostStack, mattermost_stack

import entries
import proto
from bxctl._memory import run_owner_command

pytestmark = pytest.mark.slow

Reply = Literal["yes", "no"]
LONG = "Owner keeps a long list: " + "tea, " * 460


@dataclass(frozen=True)
class Step:
    """One command as the owner writes it (without its sigil), and their reply if asked."""

    command: str
    says: str
    """Words the answer holds on both surfaces."""
    reply: Reply | None = None
    """The owner's answer to the change shown; None when nothing is to be confirmed."""


SCENARIO: tuple[Step, ...] = (
    Step("remember Owner drinks tea.", "memory.md updated ("),
    Step("remember --user Owner is called Ana.", "user.md updated ("),
    Step("remember Owner drinks green tea on Sundays.", "memory.md updated ("),
    Step("remove tea", "2 entries hold tea; give more of the one you mean"),
    Step("remove Owner drinks tea.", "nothing changed", reply="no"),
    Step("remove Owner drinks tea.", "memory.md updated (", reply="yes"),
    Step("remove --user tea", "no entry of user.md holds tea"),
    Step("remove --memory Ana", "no entry of memory.md holds Ana"),
    Step("undo", "memory.md updated (", reply="yes"),
    Step("undo ed-aaaaaa", "no memory edit ed-aaaaaa"),
    Step("why green tea", "memory.md:"),
    Step(f"remember {LONG}", "would be 2,"),
    Step("undo", "nothing changed", reply="no"),
    Step("remove Ana", "user.md updated (", reply="yes"),
)
"""The owner's day in one table: every step's answer, and the files after it, must agree."""


@dataclass(frozen=True)
class After:
    """What a step left: the answer's words and the home's files."""

    said: str
    memory: str
    user: str
    journal: tuple[tuple[str, str, bytes], ...]
    """Each applied edit's action, file, and its entries before and after (JSON)."""


def plain(text: str) -> str:
    """An answer's words: no code-span backticks, no fences, spaces collapsed."""
    text = text.replace("```text", "").replace("`", "")
    return re.sub(r"\s+", " ", text)


def files(home: Path) -> tuple[str, str, tuple[tuple[str, str, bytes], ...]]:
    lines = [
        line
        for path in sorted((home / "memory" / "edits").glob("*.jsonl"))
        for line in proto.EDIT_JOURNAL.read(path).records
    ]
    edits = sorted(
        (line for line in lines if isinstance(line, proto.AppliedEdit)), key=lambda e: e.time
    )
    journal = tuple((e.action, e.file, msgspec.json.encode((e.before, e.after))) for e in edits)
    memory = (home / "memory" / "memory.md").read_text()
    user = (home / "memory" / "user.md").read_text()
    return memory, user, journal


async def terminal(mms: MattermostStack, step: Step, capsys: pytest.CaptureFixture[str]) -> str:
    """The step as the chat runs a `/` line: in a worker thread, y/N on its input."""
    command = entries.parse_command("/" + step.command, "/")
    assert not isinstance(command, entries.ForModel | entries.NotACommand | entries.Usage)
    asked: list[str] = []

    def confirm(ask: entries.Confirm) -> bool:
        asked.append(entries.to_terminal(ask.question))
        assert step.reply is not None, f"{step.command!r} asked for a yes"
        return step.reply == "yes"

    capsys.readouterr()
    await trio.to_thread.run_sync(
        partial(run_owner_command, mms.home, command, confirm=confirm, where="chat")
    )
    assert bool(asked) == (step.reply is not None), f"{step.command!r} did not ask"
    return capsys.readouterr().out


async def mattermost(mms: MattermostStack, step: Step) -> str:
    """The step as the owner posts it: `!…`, and `yes CODE` / `no CODE` on its card."""
    root = mms.says("!" + step.command)
    answers = 1 if step.reply is None else 2
    posts = await mms.until(
        lambda: len(mms.bot_posts(root=root)) >= 1 and mms.bot_posts(root=root),
        f"the answer to {step.command!r}",
    )
    if step.reply is not None:
        card = posts[0].message
        found = re.search(r"Reply \*\*yes ([a-z0-9]{3})\*\*", card)
        assert found is not None, f"{step.command!r} showed no card: {card}"
        mms.says(f"{step.reply} {found[1]}", root=root)
        posts = await mms.until(
            lambda: len(mms.bot_posts(root=root)) >= answers and mms.bot_posts(root=root),
            f"the outcome of {step.command!r}",
        )
    else:
        assert "Reply **yes" not in posts[0].message, f"{step.command!r} asked for a yes"
    return str(posts[-1].message)


async def day(
    surface: Literal["terminal", "mattermost"], directory: Path, capsys: pytest.CaptureFixture[str]
) -> list[After]:
    """Run the table on a fresh home through one surface; what each step left."""
    seen: list[After] = []
    async with mattermost_stack(directory, start=surface == "mattermost") as mms:
        for step in SCENARIO:
            if surface == "terminal":
                said = await terminal(mms, step, capsys)
            else:
                said = await mattermost(mms, step)
            # an answer is posted or printed once brokerd replied: memoryd has journalled
            memory, user, journal = files(mms.home)
            seen.append(After(plain(said), memory, user, journal))
    return seen


async def test_one_table_of_commands_means_the_same_on_both_surfaces(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (short_dir / "t").mkdir()
    (short_dir / "m").mkdir()
    by_terminal = await day("terminal", short_dir / "t", capsys)
    by_mattermost = await day("mattermost", short_dir / "m", capsys)
    for step, here, there in zip(SCENARIO, by_terminal, by_mattermost, strict=True):
        assert step.says in here.said, f"/{step.command[:40]}: {here.said}"
        assert step.says in there.said, f"!{step.command[:40]}: {there.said}"
        assert (here.memory, here.user, here.journal) == (
            there.memory,
            there.user,
            there.journal,
        ), step
    final = by_terminal[-1]
    assert final.memory == "Owner drinks tea.\n§\nOwner drinks green tea on Sundays."
    assert final.user == ""
