"""`Vocabulary`: exact row counts from one scan and the rows added since."""

from __future__ import annotations

from memoryd_fts import append, connect

from memoryd.ranking import Vocabulary
from memoryd.ranking._fts5 import walk_count


def test_counts_stay_exact_as_rows_are_added() -> None:
    conn = connect(["alpha beta"] * 1500 + ["beta gamma"] * 500)
    vocabulary = Vocabulary()
    assert vocabulary.stale(2000)
    vocabulary.scan(conn)
    assert not vocabulary.stale(2000)
    append(conn, ["alpha delta", "Alpha alpha", "epsilon"])
    for token in ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]:
        assert vocabulary.count(conn, token) == walk_count(conn, token)
    assert vocabulary.count(conn, "alpha") == 1502
    assert not vocabulary.stale(2003)
    assert vocabulary.stale(2021)  # grown by more than 1%: time to scan again
    assert vocabulary.stale(1999)  # rows were removed


def test_no_snapshot_outlives_a_removal() -> None:
    conn = connect(["alpha beta"] * 1500 + ["beta gamma"] * 500)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    with vocabulary.removing():
        conn.execute("DELETE FROM hits WHERE rowid <= 10")
        assert vocabulary.count(conn, "alpha") == 1490  # no snapshot is used meanwhile
        vocabulary.scan(conn)  # a scan during the removal is not kept
        assert vocabulary.stale(1990)
    assert vocabulary.stale(1990)
    vocabulary.scan(conn)
    assert vocabulary.count(conn, "alpha") == 1490


def test_a_scan_that_read_before_a_removal_is_not_kept() -> None:
    conn = connect(["alpha beta"] * 1500)
    vocabulary = Vocabulary()
    real = conn.execute

    class Racing:
        """A connection whose scan meets a removal finishing in another thread."""

        def execute(self, sql: str, *args: object) -> object:
            if "hits_vocab WHERE doc" in sql:
                with vocabulary.removing():
                    pass
            return real(sql, *args)

    vocabulary.scan(Racing())
    assert vocabulary.stale(1500)
