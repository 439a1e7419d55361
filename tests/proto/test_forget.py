"""The forget rule: what holds a text, how it is taken out, and plans applied twice."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import proto

NEEDLES = st.text(min_size=2, max_size=12).filter(lambda t: proto.forget_problem(t) is None)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.text(), NEEDLES)
def test_redact_never_leaves_the_needle_in_any_case(text: str, needle: str) -> None:
    out = proto.redact(text, needle)
    assert not proto.holds(out, needle)
    if not proto.holds(text, needle):
        assert out == text


@given(st.text(), NEEDLES, st.text(), st.sampled_from([str.upper, str.lower, str.title]))
def test_an_occurrence_in_any_case_becomes_the_marker(
    before: str, needle: str, after: str, case: object
) -> None:
    assume(not proto.holds(before + "\x00" + after, needle))
    assume(not proto.holds(proto.MARKER, needle))
    cased = case(needle)  # type: ignore[operator]
    assume(cased.lower() == needle.lower())
    out = proto.redact(before + "\x00" + cased + "\x00" + after, needle)
    assert out == before + "\x00" + proto.MARKER + "\x00" + after or not proto.holds(out, needle)


@given(JSON, NEEDLES)
def test_a_redacted_json_line_decodes_and_holds_nothing(value: object, needle: str) -> None:
    line = msgspec.json.encode(value)
    out = proto.redact_line(line, needle)
    if out is None:
        assert not proto.holds_value(value, needle)
        return
    assert not proto.holds_value(msgspec.json.decode(out), needle)  # and still JSON


def test_a_copy_inside_nested_json_is_found_and_stays_json() -> None:
    arguments = msgspec.json.encode({"query": "ZEBRA-7731 please"}).decode()
    line = msgspec.json.encode({"type": "assistant", "args": arguments})
    out = proto.redact_line(line, "zebra-7731")
    assert out is not None
    inner = msgspec.json.decode(msgspec.json.decode(out)["args"])
    assert inner == {"query": "[forgotten] please"}


def test_a_damaged_line_is_redacted_as_text() -> None:
    assert (
        proto.redact_line(b'{"content":"ZEBRA-77', b"zebra-77".decode())
        == b'{"content":"[forgotten]'
    )


def test_near_matches_hold_every_word_but_not_the_text() -> None:
    assert proto.is_near("the zebra code is 7731", "ZEBRA-7731")
    assert not proto.is_near("zebra-7731", "ZEBRA-7731")
    assert not proto.is_near("a zebra", "ZEBRA-7731")


@pytest.mark.parametrize("text", ["", " ", "a", "x" * 1001, "two\nlines"])
def test_what_cannot_be_forgotten_says_why(text: str) -> None:
    assert proto.forget_problem(text) is not None


@given(st.lists(st.text(max_size=20), min_size=1, max_size=8), NEEDLES, st.integers(0, 8))
def test_a_plan_applied_half_then_again_ends_the_same(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], needle: str, half: int
) -> None:
    root = tmp_path_factory.mktemp("plan")
    lines = [
        msgspec.json.encode({"content": t + (needle if i % 2 else "")}) for i, t in enumerate(texts)
    ]
    (root / "log.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    edit = proto.LinesEdit(path="log.jsonl", lines=proto.line_edits(lines, needle))
    assert not any(proto.holds_value(msgspec.json.decode(s.new), needle) for s in edit.lines)
    partial = proto.LinesEdit(path="log.jsonl", lines=edit.lines[:half])
    proto.apply_file_edits(root, [partial])  # a kill after part of it
    assert proto.apply_file_edits(root, [edit]) == []
    assert proto.verify_file_edit(root, edit) == []
    data = (root / "log.jsonl").read_bytes()
    decoded = [msgspec.json.decode(line) for line in data.splitlines()]
    assert not proto.holds_value(decoded, needle)  # decoded: `\u0007` does not hold "00"
    assert data.count(b"\n") == len(lines)
    done = (root / "log.jsonl").stat()
    assert proto.apply_file_edits(root, [edit]) == []
    assert (root / "log.jsonl").stat().st_ino == done.st_ino  # not even rewritten


def test_a_line_changed_since_the_plan_is_a_conflict_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "log.jsonl").write_bytes(b'{"a":"zebra"}\n')
    edit = proto.LinesEdit(path="log.jsonl", lines=proto.line_edits([b'{"a":"zebra"}'], "zebra"))
    (tmp_path / "log.jsonl").write_bytes(b'{"a":"zebra!"}\n')
    assert proto.apply_file_edits(tmp_path, [edit]) == [
        "log.jsonl:1: changed since the plan was made"
    ]
    assert (tmp_path / "log.jsonl").read_bytes() == b'{"a":"zebra!"}\n'


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x"])
def test_a_plan_cannot_name_a_path_outside_its_root(tmp_path: Path, path: str) -> None:
    (conflict,) = proto.apply_file_edits(tmp_path, [proto.WholeEdit(path=path, old="", new="")])
    assert "outside its root" in conflict


def test_plans_round_trip_and_hold_no_text(tmp_path: Path) -> None:
    files = proto.ForgetFiles(tmp_path / ".forget", proto.NoSteps)
    plan: proto.ForgetPlan[proto.NoSteps] = proto.ForgetPlan(
        plan=proto.new_plan_id(),
        edits=[proto.LinesEdit(path="a", lines=proto.line_edits([b'"ZEBRA"'], "zebra"))],
    )
    files.plans.write(plan.plan, plan)
    assert files.plans.read(plan.plan) == plan
    assert b"zebra" not in (tmp_path / ".forget" / f"{plan.plan}.json").read_bytes().lower()
    assert files.plans.ids() == [plan.plan]
    ended = files.end(plan.plan, "applied", {"log": 1})
    assert files.plans.read(plan.plan) is None
    assert files.plans.ids() == []
    assert files.ended(plan.plan) == ended
    assert files.ended(proto.new_plan_id()) is None
    with pytest.raises(ValueError, match="not a forget id"):
        files.plans.read("../../etc")


def test_a_number_in_a_tool_calls_arguments_is_found_but_a_records_own_is_not() -> None:
    line = msgspec.json.encode({"line": 7731, "arguments": '{"code": 7731, "n": true}'})
    assert proto.holds_value(msgspec.json.decode(line), "7731")
    out = proto.redact_line(line, "7731")
    assert out is not None
    decoded = msgspec.json.decode(out)
    assert decoded["line"] == 7731  # the record's shape stays
    assert msgspec.json.decode(decoded["arguments"]) == {"code": "[forgotten]", "n": True}
    assert proto.redact_line(msgspec.json.encode({"line": 7731}), "7731") is None


TEXTS = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXTS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(TEXTS, inner, max_size=3)
        | st.dictionaries(TEXTS, inner, max_size=3).map(lambda d: msgspec.json.encode(d).decode())
    ),
    max_leaves=8,
)


@given(VALUES, NEEDLES, st.booleans())
def test_the_quick_test_never_skips_what_holds_the_text(
    value: object, needle: str, ascii_only: bool
) -> None:
    data = (
        json.dumps(value, ensure_ascii=True).encode()  # \\u escapes, as other writers do
        if ascii_only
        else msgspec.json.encode(value)
    )
    if proto.holds_value(msgspec.json.decode(data), needle):
        assert proto.may_hold(data, needle)


def test_the_quick_test_skips_a_plain_line_without_it() -> None:
    assert not proto.may_hold(b'{"content":"tea at five","n":7}', "zebra")
    assert proto.may_hold(b'{"content":"\\u007aebra"}', "zebra")  # an escape: decode it
    assert proto.may_hold(b'{"content":"ZEBRA"}', "zebra")


@given(st.text(max_size=10), st.text(max_size=3), NEEDLES.filter(lambda n: len(n) >= 2))
def test_an_invisible_character_inside_a_copy_does_not_hide_it(
    before: str, after: str, needle: str
) -> None:
    hidden = needle[:1] + "\u200b" + needle[1:]  # what a terminal shows as the needle
    text = before + hidden + after
    assert proto.holds(text, needle)
    assert not proto.holds(proto.redact(text, needle), needle)


def test_invisible_characters_alone_cannot_be_forgotten() -> None:
    assert proto.forget_problem("\u200b\u2060\u200b") is not None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("my pin is 55\u200b12", "5512"),
        ("PIN 55\u00ad12", "5512"),
        ("Hauptstraße 3", "HAUPTSTRASSE"),
        ("HAUPTSTRASSE 3", "hauptstraße"),
        ("ΣΊΣΥΦΟΣ", "σίσυφος"),
        ("ﬁle", "FILE"),
    ],
)
def test_holds_folds_invisible_characters_and_case_fully(text: str, needle: str) -> None:
    assert proto.holds(text, needle)
    redacted = proto.redact(text, needle)
    assert proto.MARKER in redacted
    assert not proto.holds(redacted, needle)


@given(TEXTS, NEEDLES)
def test_fold_is_casefold_without_invisible_characters(text: str, needle: str) -> None:
    stripped = "".join(c for c in text if not proto.is_default_ignorable(c))
    assert proto.fold(text) == stripped.casefold()
    assert proto.holds(text, needle) == (proto.fold(needle) in stripped.casefold())
