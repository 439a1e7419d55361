"""LoCoMo conversations for `bench recall-quality`: read, mapped to session records, scored.

The pure part of the bench (no process, no socket, no file but the JSON read), kept apart
so that a gate test can load it on its own. A LoCoMo file holds two people's sessions
(`session_N`, each a list of turns `{speaker, dia_id, text, blip_caption?}`, and when it
happened, `session_N_date_time`) and the questions asked about them (`qa`, each with the
`dia_id`s of the turns holding its answer, `evidence`, and a category).

Each session becomes one boxmaker session: the first person's turns are the owner's
records (`UserRecord`), the other's the assistant's (`AssistantRecord`), one a minute from
the session's date and time, each reading `Name: text` and, when the speaker shared a
photo, ` [shares a photo: CAPTION]`. Record `i` of a session's log is its turn `i`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import proto
from proto import AssistantRecord, UserRecord

__all__ = [
    "CATEGORIES",
    "Conversation",
    "LocomoSession",
    "Question",
    "Scores",
    "Turn",
    "evidence_ids",
    "found_at",
    "load",
    "parse_date_time",
    "score",
    "session_records",
    "turn_text",
]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""The categories measured; 5 (adversarial: no answer in the conversation) is left out."""

_EVIDENCE_ID = re.compile(r"D:?0*(\d+):0*(\d+)")
_SESSION_KEY = re.compile(r"session_([0-9]+)")
_DATE_TIME = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None = None


@dataclass(frozen=True)
class LocomoSession:
    number: int
    started: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: tuple[str, ...]
    """Normalised, each naming a turn of the conversation; never empty."""


@dataclass(frozen=True)
class Conversation:
    name: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[LocomoSession, ...]
    questions: tuple[Question, ...]
    dropped: int
    """Questions of categories 1-4 left out: none of their evidence names a turn."""

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def evidence_ids(raw: Iterable[str]) -> list[str]:
    """The evidence ids as `D<session>:<turn>`, each once, in order.

    Malformed ones are mended: `D8:6; D9:17` is two ids, `D:11:26` is `D11:26`, `D30:05`
    is `D30:5`; a string holding no id gives none.
    """
    found: list[str] = []
    for item in raw:
        for session, turn in _EVIDENCE_ID.findall(item):
            canonical = f"D{int(session)}:{int(turn)}"
            if canonical not in found:
                found.append(canonical)
    return found


def parse_date_time(text: str) -> datetime:
    """`1:56 pm on 8 May, 2023` as a UTC moment (LoCoMo gives no zone)."""
    return datetime.strptime(text.strip(), _DATE_TIME).replace(tzinfo=UTC)


def turn_text(turn: Turn) -> str:
    """`Name: text`, and ` [shares a photo: CAPTION]` when the speaker shared one."""
    text = f"{turn.speaker}: {turn.text}"
    if turn.caption:
        text += f" [shares a photo: {turn.caption}]"
    return text


def session_records(
    conversation: Conversation, session: LocomoSession
) -> list[UserRecord | AssistantRecord]:
    """The session's log: record `i` is turn `i`, one minute after turn `i - 1`."""
    records: list[UserRecord | AssistantRecord] = []
    for i, turn in enumerate(session.turns):
        time = proto.utc_stamp(session.started + timedelta(minutes=i))
        text = turn_text(turn)
        if turn.speaker == conversation.speaker_a:
            records.append(UserRecord(time=time, content=text))
        else:
            records.append(AssistantRecord(time=time, content=text))
    return records


def load(path: Path) -> Conversation:
    """A LoCoMo conversation file: its sessions in order and its questions of categories 1-4."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions: list[LocomoSession] = []
    for key, value in data.items():
        found = _SESSION_KEY.fullmatch(key)
        if found is None or not value:
            continue
        number = int(found.group(1))
        turns = tuple(
            Turn(
                dia_id=t["dia_id"],
                speaker=t["speaker"],
                text=t["text"],
                caption=t.get("blip_caption") or None,
            )
            for t in value
        )
        started = parse_date_time(data[f"session_{number}_date_time"])
        sessions.append(LocomoSession(number=number, started=started, turns=turns))
    sessions.sort(key=lambda s: s.number)
    known = {turn.dia_id for s in sessions for turn in s.turns}
    questions: list[Question] = []
    dropped = 0
    for qa in data.get("qa", []):
        category = int(qa.get("category", 0))
        if category not in CATEGORIES:
            continue
        evidence = tuple(e for e in evidence_ids(qa.get("evidence", [])) if e in known)
        if not evidence:
            dropped += 1
            continue
        questions.append(
            Question(
                conversation=path.stem,
                text=str(qa["question"]),
                category=category,
                evidence=evidence,
            )
        )
    return Conversation(
        name=path.stem,
        speaker_a=data["speaker_a"],
        speaker_b=data["speaker_b"],
        sessions=tuple(sessions),
        questions=tuple(questions),
        dropped=dropped,
    )


def found_at(ranked: Sequence[str | None], evidence: Collection[str], k: int) -> tuple[bool, bool]:
    """Whether any, and whether all, of `evidence` is among the first `k` of `ranked`."""
    top = set(ranked[:k])
    hits = [e in top for e in evidence]
    return any(hits), bool(hits) and all(hits)


@dataclass(frozen=True)
class Scores:
    """One way of ranking over every question: the share found, overall and per category."""

    questions: int
    any_at: dict[int, float]
    """k -> the share of questions with some evidence turn in the top k."""
    all_at: dict[int, float]
    """k -> the share of questions with every evidence turn in the top k."""
    category_any_at: dict[int, dict[int, float]]
    """category -> k -> the share of that category's questions with some evidence found."""
    category_questions: dict[int, int]


def score(
    questions: Sequence[Question], ranked: Sequence[Sequence[str | None]], ks: Sequence[int]
) -> Scores:
    """R@k any and all for each k in `ks`: `ranked[i]` is the dia_ids found for question i."""
    if len(questions) != len(ranked):
        raise ValueError("one ranking per question")
    any_at: dict[int, float] = {}
    all_at: dict[int, float] = {}
    per_category: dict[int, dict[int, float]] = {c: {} for c in CATEGORIES}
    counts = {c: sum(1 for q in questions if q.category == c) for c in CATEGORIES}
    for k in ks:
        found = [found_at(r, q.evidence, k) for q, r in zip(questions, ranked, strict=True)]
        any_at[k] = _share(sum(a for a, _ in found), len(questions))
        all_at[k] = _share(sum(b for _, b in found), len(questions))
        for c in CATEGORIES:
            hit = sum(a for q, (a, _) in zip(questions, found, strict=True) if q.category == c)
            per_category[c][k] = _share(hit, counts[c])
    return Scores(
        questions=len(questions),
        any_at=any_at,
        all_at=all_at,
        category_any_at=per_category,
        category_questions=counts,
    )


def _share(hits: int, total: int) -> float:
    return hits / total if total else float("nan")
