"""Session ids (checked before they touch a path) and labels (a lattice)."""

from __future__ import annotations

import itertools
import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto import (
    BadSessionId,
    Class,
    Label,
    ProtocolError,
    SessionOpen,
    SessionUpdated,
    check_session_id,
    decode_body,
)

VALID_IDS = st.from_regex(r"\A[a-z]{2,8}-[a-z0-9]{8,64}\Z")

BAD_IDS = [
    "../x",
    "chat-abc/../../etc",
    "chat-abcdefgh/../../../etc/passwd",
    "CHAT-abcdefgh",
    "chat-ABCDEFGH",
    "chat-abcdefgh\n",
    "\nchat-abcdefgh",
    "chat-abcdefgh ",
    " chat-abcdefgh",
    "chat-abcdefg",  # 7 after the dash
    "chat-" + "a" * 65,
    "c-abcdefgh",  # 1 before the dash
    "abcdefghi-abcdefgh",  # 9 before the dash
    "chat_abcdefgh",
    "chatabcdefgh",
    "chat--abcdefgh",
    "chat-abcd-efgh",
    "ch4t-abcdefgh",
    "chat-abcdéfgh",
    "chat-abcdefgh\x00",
    "",
]


def is_session_id(value: str) -> bool:
    """An oracle written apart from the library's regex."""
    prefix, dash, rest = value.partition("-")
    return (
        dash == "-"
        and 2 <= len(prefix) <= 8
        and 8 <= len(rest) <= 64
        and all(c in string.ascii_lowercase for c in prefix)
        and all(c in string.ascii_lowercase + string.digits for c in rest)
    )


def mutated(value: str, where: int, insert: str) -> str:
    where %= len(value) + 1
    return value[:where] + insert + value[where:]


CANDIDATES = st.one_of(
    VALID_IDS,
    st.builds(
        mutated,
        VALID_IDS,
        st.integers(0, 80),
        st.sampled_from(["\n", "A", "-", "/", ".", " ", "é", "0", "a", "\x00"]),
    ),
    st.text(max_size=80),
)


@given(VALID_IDS)
def test_valid_ids_are_accepted_unchanged(value: str) -> None:
    assert is_session_id(value)
    assert check_session_id(value) is value


@pytest.mark.parametrize("value", BAD_IDS)
def test_bad_ids_are_refused(value: str) -> None:
    assert not is_session_id(value)
    with pytest.raises(BadSessionId) as caught:
        check_session_id(value)
    assert caught.value.code == "bad-session-id"
    assert isinstance(caught.value, ValueError)
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("value", [None, 123, b"chat-abcdefgh", ["chat-abcdefgh"]])
def test_non_strings_are_refused(value: Any) -> None:
    with pytest.raises(BadSessionId, match="bad session id"):
        check_session_id(value)


@settings(max_examples=200)
@given(CANDIDATES)
def test_check_session_id_agrees_with_the_oracle(value: str) -> None:
    if is_session_id(value):
        assert check_session_id(value) == value
    else:
        with pytest.raises(BadSessionId):
            check_session_id(value)


def session_updated(session: Any) -> bytes:
    return json.dumps({"kind": "session_updated", "session": session}).encode()


@settings(max_examples=200)
@given(CANDIDATES)
def test_the_session_id_annotation_agrees_with_the_oracle(value: str) -> None:
    if is_session_id(value):
        assert decode_body(session_updated(value)) == SessionUpdated(session=value)
    else:
        with pytest.raises(ProtocolError, match=r"at `\$\.session`"):
            decode_body(session_updated(value))


@pytest.mark.parametrize("value", BAD_IDS)
def test_a_decoded_frame_refuses_bad_ids(value: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_body(session_updated(value))
    assert caught.value.code == "bad-frame"
    assert "at `$.session`" in str(caught.value)


def test_a_decoded_frame_refuses_a_trailing_newline() -> None:
    body = b'{"kind":"session_updated","session":"chat-abcdefgh\\n"}'
    with pytest.raises(ProtocolError, match=r"at `\$\.session`"):
        decode_body(body)
    assert decode_body(body.replace(b"\\n", b"")) == SessionUpdated(session="chat-abcdefgh")


@pytest.mark.parametrize("value", [None, 123, ["chat-abcdefgh"]])
def test_a_decoded_frame_refuses_a_non_string_id(value: Any) -> None:
    with pytest.raises(ProtocolError, match=r"at `\$\.session`"):
        decode_body(session_updated(value))


def test_an_optional_session_is_checked_too() -> None:
    assert decode_body(b'{"kind":"session_open","origin":"cli"}') == SessionOpen(origin="cli")
    with pytest.raises(ProtocolError, match=r"at `\$\.session`"):
        decode_body(b'{"kind":"session_open","origin":"cli","session":"../../etc"}')


# -- labels -------------------------------------------------------------------------------

ORDER = ["public", "private", "secret"]
ALL_LABELS = [
    Label(class_=cls, untrusted=untrusted)
    for cls, untrusted in itertools.product(Class, [False, True])
]
LABELS = st.sampled_from(ALL_LABELS)


def at_most(a: Label, b: Label) -> bool:
    """`a` is no stricter than `b`, by the order written out above."""
    return ORDER.index(a.class_) <= ORDER.index(b.class_) and (b.untrusted or not a.untrusted)


def test_all_labels_are_six_distinct_values() -> None:
    assert len(set(ALL_LABELS)) == 6


def test_class_order() -> None:
    assert list(Class) == [Class.public, Class.private, Class.secret]
    assert [str(cls) for cls in Class] == ORDER
    assert Class.public.rank < Class.private.rank < Class.secret.rank
    assert Class.public.higher(Class.secret) is Class.secret
    assert Class.secret.higher(Class.public) is Class.secret
    assert Class.private.higher(Class.public) is Class.private
    assert Class.private.higher(Class.private) is Class.private


def test_default_label_is_private_and_trusted() -> None:
    assert Label() == Label(class_=Class.private, untrusted=False)


@given(LABELS, LABELS)
def test_join_is_the_higher_class_and_untrusted_if_either(a: Label, b: Label) -> None:
    joined = a.join(b)
    assert joined.class_ == max(a.class_, b.class_, key=ORDER.index)
    assert joined.untrusted is (a.untrusted or b.untrusted)


@given(LABELS, LABELS)
def test_join_is_commutative(a: Label, b: Label) -> None:
    assert a.join(b) == b.join(a)


@given(LABELS, LABELS, LABELS)
def test_join_is_associative(a: Label, b: Label, c: Label) -> None:
    assert a.join(b).join(c) == a.join(b.join(c))


@given(LABELS)
def test_join_is_idempotent(a: Label) -> None:
    assert a.join(a) == a


@given(LABELS, LABELS, LABELS)
def test_join_is_monotone_and_the_least_upper_bound(a: Label, b: Label, c: Label) -> None:
    joined = a.join(b)
    assert at_most(a, joined)
    assert at_most(b, joined)
    if at_most(a, c) and at_most(b, c):
        assert at_most(joined, c)
    if at_most(a, c):
        assert at_most(a.join(b), c.join(b))


def test_at_least_raises_the_class_and_keeps_the_trust() -> None:
    public_untrusted = Label(class_=Class.public, untrusted=True)
    assert public_untrusted.at_least(Class.private) == Label(class_=Class.private, untrusted=True)
    secret = Label(class_=Class.secret)
    assert secret.at_least(Class.private) == secret


def test_describe() -> None:
    assert Label().describe() == "private"
    assert Label(class_=Class.public, untrusted=True).describe() == "public · untrusted"
