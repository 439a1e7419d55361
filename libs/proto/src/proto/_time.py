"""Time as every record, journal, audit line and log shows it: UTC, to the second, with `Z`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

__all__ = ["TIME_FORMAT", "month_file", "utc_now", "utc_stamp"]

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""ISO 8601 with seconds and `Z`: `2026-09-24T20:14:03Z`."""


def utc_now() -> datetime:
    """The current time in UTC (the one clock every role uses)."""
    return datetime.now(UTC)


def utc_stamp(moment: datetime | None = None) -> str:
    """`moment` (default: now) as `2026-09-24T20:14:03Z`."""
    return (moment or utc_now()).strftime(TIME_FORMAT)


def month_file(directory: Path, moment: datetime) -> Path:
    """`directory/YYYY-MM.jsonl` for the month of `moment` (UTC): journals, audit, recalls."""
    return directory / f"{moment:%Y-%m}.jsonl"
