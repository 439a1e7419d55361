"""The embedded model's chat format hands its template every text as it was said."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bxctl._model_server import as_written


class Safe(str):
    """Stands for markupsafe's `Markup` (a `str` the template writes as it is)."""


texts = st.text()
calls = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=8), "type": st.just("function")},
        optional={
            "function": st.fixed_dictionaries(
                {"name": st.text(max_size=8)}, optional={"arguments": st.one_of(texts, st.none())}
            )
        },
    ),
    max_size=3,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
        optional={
            "content": st.one_of(texts, st.none(), st.lists(st.dictionaries(texts, texts))),
            "tool_calls": calls,
            "tool_call_id": texts,
        },
    ),
    max_size=6,
)


@given(messages)
def test_every_written_text_is_marked_and_nothing_else_changes(said: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(said)
    written = as_written(said, Safe)
    assert said == before  # the server's messages are not touched
    assert written == said  # the same texts (a `Safe` equals its `str`)
    for was, now in zip(said, written, strict=True):
        assert (type(now.get("content")) is Safe) == isinstance(was.get("content"), str)
        assert type(now.get("tool_call_id", "")) is str  # not written by the template
        for old, new in zip(was.get("tool_calls", []), now.get("tool_calls", []), strict=True):
            arguments = old.get("function", {}).get("arguments")
            marked = type(new.get("function", {}).get("arguments")) is Safe
            assert marked == isinstance(arguments, str)
