"""A start walks only the audit records after its checkpoint; `verify` walks them all.

The checkpoint (`audit/checkpoint`) vouches, under brokerd's key, for the records up to
it: a record before it changed in place (same size) is not found by a start, only by
`verify`. Everything else a start found before it still finds: a torn tail, any record
after the checkpoint, a head that does not match; and a checkpoint that does not match
the log (or is missing, or not brokerd's) means the whole walk.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from brokerd import _audit
from brokerd._audit_checkpoint import CHECKPOINT
from brokerd._audit_walk import Macs
from proto import AUDIT_GENESIS as GENESIS
from proto import AuditRecordV3, Class, Label, TextCommits

from .test_audit import CAP_S, OCT, SEPT, lines, opened, record, verified, written

WHOLE_WALK = "walking the whole log"


def _same_size_change(path: Path, index: int) -> None:
    """Change record `index`'s call id in place, one byte for another: the size stays."""
    content = lines(path)
    assert b'"call":"c' in content[index]
    content[index] = content[index].replace(b'"call":"c', b'"call":"x', 1)
    path.write_bytes(b"\n".join(content) + b"\n")


async def _checkpointed(directory: Path, count: int) -> None:
    """A log of `count` records and a checkpoint of them all (the next start's walk)."""
    await written(directory, *([SEPT] * count))
    opened(directory)
    assert (directory / CHECKPOINT).exists()


async def test_a_record_the_checkpoint_vouches_for_is_not_walked_at_start_but_verify_finds_it(
    tmp_path: Path,
) -> None:
    await _checkpointed(tmp_path, 3)
    _same_size_change(tmp_path / "2026-09.jsonl", 1)
    audit = opened(tmp_path)
    assert audit.broken is None  # the trade: a start trusts what the checkpoint covers
    verdict = await verified(audit)
    assert verdict.broken_at is not None
    assert verdict.broken_at.startswith("2026-09.jsonl line 2: its MAC does not match")


async def test_a_record_after_the_checkpoint_is_walked_at_start(tmp_path: Path) -> None:
    await _checkpointed(tmp_path, 2)
    await written(tmp_path, SEPT)  # a third record, after the checkpoint
    _same_size_change(tmp_path / "2026-09.jsonl", 2)
    audit = opened(tmp_path)
    assert audit.broken is not None
    assert "2026-09.jsonl line 3: its MAC does not match" in audit.broken


async def test_records_after_the_checkpoint_in_its_own_month_keep_it_usable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A home in use: its checkpoint's month file has grown since. The start uses the
    # checkpoint still (the change before it is verify's to find, not the start's).
    await _checkpointed(tmp_path, 3)
    await written(tmp_path, SEPT, SEPT)
    _same_size_change(tmp_path / "2026-09.jsonl", 1)
    with caplog.at_level(logging.INFO, logger="brokerd.audit"):
        audit = opened(tmp_path)
    assert WHOLE_WALK not in caplog.text
    assert audit.broken is None
    assert (await verified(audit)).broken_at is not None


async def test_a_torn_tail_after_the_checkpoint_is_cut_at_start(tmp_path: Path) -> None:
    await _checkpointed(tmp_path, 2)
    path = tmp_path / "2026-09.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"time":"2026-09-30T23:5')
    again = opened(tmp_path)
    assert path.read_bytes() == whole
    assert again.broken is None
    assert (await verified(again)).broken_at is None


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda d: (d / CHECKPOINT).unlink(), id="missing"),
        pytest.param(
            lambda d: (d / CHECKPOINT).write_bytes(
                (d / CHECKPOINT).read_bytes().replace(b'"records":3', b'"records":2')
            ),
            id="not-brokerd's",
        ),
        pytest.param(lambda d: (d / CHECKPOINT).write_bytes(b"{"), id="not-a-checkpoint"),
    ],
)
async def test_a_checkpoint_that_cannot_be_used_means_the_whole_walk(
    tmp_path: Path, spoil: object
) -> None:
    await _checkpointed(tmp_path, 3)
    _same_size_change(tmp_path / "2026-09.jsonl", 1)
    assert callable(spoil)
    spoil(tmp_path)
    audit = opened(tmp_path)
    assert audit.broken is not None
    assert "2026-09.jsonl line 2: its MAC does not match" in audit.broken


async def test_a_month_file_not_the_size_the_checkpoint_records_means_the_whole_walk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await written(tmp_path, SEPT, SEPT, SEPT, OCT)
    opened(tmp_path)  # the checkpoint, at the end of October's file
    path = tmp_path / "2026-09.jsonl"
    content = lines(path)
    content[1] = content[1].replace(b'"call":"c1"', b'"call":"c11"')
    path.write_bytes(b"\n".join(content) + b"\n")
    with caplog.at_level(logging.INFO, logger="brokerd.audit"):
        audit = opened(tmp_path)
    assert WHOLE_WALK in caplog.text
    assert audit.broken is not None
    assert "2026-09.jsonl line 2: its MAC does not match" in audit.broken


async def test_a_head_that_does_not_match_the_log_after_the_checkpoint_is_found(
    tmp_path: Path,
) -> None:
    await _checkpointed(tmp_path, 2)
    await written(tmp_path, SEPT)
    path = tmp_path / "2026-09.jsonl"
    path.write_bytes(b"\n".join(lines(path)[:2]) + b"\n")  # the record after it, cut
    audit = opened(tmp_path)
    assert audit.broken is not None
    assert "records were removed from its end" in audit.broken


async def test_a_missing_head_is_found_whatever_the_checkpoint(tmp_path: Path) -> None:
    await _checkpointed(tmp_path, 2)
    (tmp_path / "head").unlink()
    audit = opened(tmp_path)
    assert audit.broken is not None
    assert "is missing" in audit.broken


async def test_labels_and_unfinished_calls_before_and_after_the_checkpoint_are_kept(
    tmp_path: Path,
) -> None:
    audit = opened(tmp_path)
    secret = Label(class_=Class.secret)
    with trio.fail_after(CAP_S):
        await audit.append(record("c1", session="chat-a", label=secret), SEPT)
        await audit.append(record("c2", session="chat-b", status="started"), SEPT)
    opened(tmp_path)  # the checkpoint
    again = opened(tmp_path)
    with trio.fail_after(CAP_S):
        await again.append(record("c3", session="chat-c", label=Label(untrusted=True)), SEPT)
    last = opened(tmp_path)
    assert last.returned == {
        "chat-a": secret,
        "chat-b": _audit.UNKNOWN_RESULT,
        "chat-c": Label(untrusted=True),
    }


async def test_a_checkpoint_is_written_every_so_many_durable_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_audit, "CHECKPOINT_EVERY", 2)
    audit = opened(tmp_path)
    with trio.fail_after(CAP_S):
        await audit.append(record("c1", session="chat-a", label=Label(untrusted=True)), SEPT)
        assert not (tmp_path / CHECKPOINT).exists()
        await audit.append(record("c2"), SEPT)
    assert (tmp_path / CHECKPOINT).exists()
    _same_size_change(tmp_path / "2026-09.jsonl", 1)
    with caplog.at_level(logging.INFO, logger="brokerd.audit"):
        again = opened(tmp_path)
    assert WHOLE_WALK not in caplog.text
    assert again.broken is None
    assert again.returned["chat-a"] == Label(untrusted=True)


_text = st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32),
    arguments=_text,
    proposed=st.none() | _text,
    reason=st.none() | _text,
    committed=st.booleans(),
)
def test_the_walk_signs_as_proto_does(
    key: bytes, arguments: str, proposed: str | None, reason: str | None, committed: bool
) -> None:
    unsigned = AuditRecordV3(
        v=3,
        time="2026-09-30T23:59:59Z",
        session="chat-abcdefghijklmnop",
        call="c1",
        tool="memory",
        arguments=arguments,
        decision="auto",
        label=Label(),
        status="ok",
        proposed=proposed,
        reason=reason,
        taint=Label(),
        commits=TextCommits(arguments=""),
        prev=GENESIS,
        mac="",
    )
    commit_key = proto.audit_commit_key(key)
    if committed:
        unsigned = AuditRecordV3(
            **{
                **{f: getattr(unsigned, f) for f in unsigned.__struct_fields__},
                "commits": proto.audit_commits(commit_key, unsigned),
            }
        )
    macs = Macs(key)
    assert macs.record(unsigned) == proto.audit_mac(key, unsigned)
    assert macs.unmatched_texts(unsigned) == proto.unmatched_texts(commit_key, unsigned)
