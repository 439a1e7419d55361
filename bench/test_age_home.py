"""`bench age`'s home builder: a day's home is what the roles' own readers take.

Not in the gate (bench/ is not collected): `uv run python -m pytest -q bench/test_age_home.py`.
"""

from __future__ import annotations

from pathlib import Path

import proto
from bench import _age_home
from brokerd._audit import Audit
from memoryd._edits import read_history
from memoryd._files import MemoryDir


def test_a_day_is_sixty_sessions_with_their_calls_edits_and_audit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    facts = _age_home.build_home(home, 1 / 365, lambda what, done, total: None)

    assert facts.days == 1
    assert facts.sessions == _age_home.SESSIONS_A_DAY + 1  # and the long one
    assert facts.edits == _age_home.EDITS_A_DAY
    long_calls = _age_home.LONG_SESSION_RECORDS // 4
    assert abs(facts.calls - long_calls - _age_home.CALLS_A_DAY) <= 40
    assert facts.audit_records == 2 * facts.calls
    catalog = proto.read_catalog(home / "sessions")
    assert catalog is not None
    assert not catalog.damaged
    assert len(catalog.entries) == facts.sessions
    long = proto.SESSION_LOG.read(home / "sessions" / facts.long_session / proto.LOG_FILE)
    assert len(long.records) == _age_home.LONG_SESSION_RECORDS
    assert len(read_history(MemoryDir(home / "memory"), None)) == facts.edits
    audit = Audit(home / "audit", home / "keys" / "audit.key")
    audit.open()
    verdict = audit.verify_now()
    assert verdict.broken_at is None
    assert verdict.records == facts.audit_records
