"""`proto.drop_from_catalog`: one session's lines out, every other line kept in order."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import proto

_ids = st.sampled_from([f"chat-{n:08d}" for n in range(6)])


@given(sessions=st.lists(_ids, max_size=12), dropped=_ids, torn=st.booleans())
def test_dropping_a_session_keeps_every_other_line_in_order(
    sessions: list[str], dropped: str, torn: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for i, session in enumerate(sessions):
            created = f"2026-01-01T00:00:{i:02d}Z"
            proto.append_to_catalog(root, proto.CatalogEntry(session=session, created=created))
        before = proto.read_catalog(root)
        if torn:  # a crash tore loopd's last append
            with (root / proto.CATALOG_FILE).open("ab") as f:
                f.write(b'{"session":"chat-')
        proto.drop_from_catalog(root, dropped)
        after = proto.read_catalog(root)
    expected = [] if before is None else [e for e in before.entries if e.session != dropped]
    if not sessions and not torn:
        assert after is None  # there was no catalog, and none was made
    else:
        assert after is not None
        assert after.entries == expected
        assert not after.damaged  # a torn line names no session: dropped with it
