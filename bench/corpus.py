"""Synthetic session logs for the index benchmark: English-like text, Zipf vocabulary.

Deterministic for a seed. Each session is a run of turns: the owner's message, sometimes
an assistant tool call (with a little text) and its result, then the assistant's answer.
Tool results are mostly private, some fetched pages public and untrusted, a few secret
(the rest of such a session is then above max_class and not indexed). `generate` writes
logs until the rows memoryd will index reach the number asked for, and archive.md.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec

import entries
from proto import AssistantRecord, Class, ToolCall, ToolResultRecord, UserRecord

_COMMON_WORDS = (
    "the of and to a in is it you that he was for on are with as i his they be at one have "
    "this from or had by not word but what some we can out other were all there when up use "
    "your how said an each she which do their time if will way about many then them write "
    "would like so these her long make thing see him two has look more day could go come did "
    "number sound no most people my over know water than call first who may down side been "
    "now find any new work part take get place made live where after back little only round "
    "man year came show every good me give our under name very through just form sentence "
    "great think say help low line differ turn cause much mean before move right boy old too "
    "same tell does set three want air well also play small end put home read hand port large"
)
COMMON = _COMMON_WORDS.split()
_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl sh st th tr"
ONSETS = _ONSETS.split()
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou"]
CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck"]
ZIPF_S = 1.0


@dataclass
class Corpus:
    """What was generated: counts, and a sampler of words for queries."""

    logs: int
    lines: int
    rows: int
    archive: int
    vocabulary: list[str]
    cum_weights: list[float]

    def words(self, rng: random.Random, k: int, *, skip: int = 0) -> list[str]:
        """`k` words drawn with Zipf weights from the vocabulary ranks at `skip` and above."""
        base = self.cum_weights[skip - 1] if skip else 0.0
        total = self.cum_weights[-1] - base
        picked = []
        for _ in range(k):
            target = base + rng.random() * total
            lo, hi = skip, len(self.cum_weights) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if self.cum_weights[mid] < target:
                    lo = mid + 1
                else:
                    hi = mid
            picked.append(self.vocabulary[lo])
        return picked


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """`size` distinct words: common English first, then pronounceable made-up ones."""
    words = list(dict.fromkeys(COMMON))
    seen = set(words)
    while len(words) < size:
        word = "".join(
            rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(rng.choice((1, 2, 2, 3)))
        ) + rng.choice(CODAS)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class _Text:
    def __init__(self, rng: random.Random, words: list[str], cum: list[float]) -> None:
        self.rng = rng
        self.words = words
        self.cum = cum

    def text(self, n: int) -> str:
        picked = self.rng.choices(self.words, cum_weights=self.cum, k=n)
        sentences = []
        i = 0
        while i < n:
            length = self.rng.randint(5, 14)
            chunk = picked[i : i + length]
            sentences.append(chunk[0].capitalize() + " " + " ".join(chunk[1:]) + ".")
            i += length
        return " ".join(sentences)


def _time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _session_id(rng: random.Random) -> str:
    return "chat-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz234567", k=26))


def generate(home: Path, rows: int, *, seed: int = 20260924, vocab_size: int = 50_000) -> Corpus:
    """Write `{home}/sessions/*/0.jsonl` and `{home}/memory/archive.md`; see the module doc."""
    rng = random.Random(seed)
    words = vocabulary(rng, vocab_size)
    cum = _cumulative(words)
    text = _Text(rng, words, cum)
    pool = [text.text(rng.randint(60, 300)) for _ in range(400)]
    encoder = msgspec.json.Encoder()
    sessions = home / "sessions"
    sessions.mkdir(parents=True, mode=0o700, exist_ok=True)
    clock = datetime(2024, 1, 1, tzinfo=UTC)
    made = lines = logs = 0
    while made < rows:
        session = _session_id(rng)
        directory = sessions / session
        directory.mkdir(mode=0o700)
        secret = False
        out: list[bytes] = []
        for turn in range(rng.randint(3, 30)):
            clock += timedelta(seconds=rng.randint(20, 4000))
            records: list[UserRecord | AssistantRecord | ToolResultRecord] = [
                UserRecord(time=_time(clock), content=text.text(rng.randint(5, 40)))
            ]
            if not secret:
                made += 1
            if rng.random() < 0.6:
                tool = rng.choice(("read_file", "read_file", "http_fetch", "list_dir"))
                w = text.words[rng.randrange(100, 5000)]
                arguments = {
                    "read_file": {"path": f"/srv/notes/{w}.txt"},
                    "list_dir": {"path": f"/srv/{w}"},
                    "http_fetch": {"url": f"https://example.org/{w}/{turn}"},
                }[tool]
                call = ToolCall(id=f"call-{turn}", name=tool, arguments=json.dumps(arguments))
                content = text.text(rng.randint(5, 15)) if rng.random() < 0.4 else None
                records.append(
                    AssistantRecord(time=_time(clock), content=content, tool_calls=[call])
                )
                if not secret:
                    made += 1 + (content is not None)
                class_ = Class.public if tool == "http_fetch" else Class.private
                if rng.random() < 0.01:
                    class_ = Class.secret
                records.append(
                    ToolResultRecord(
                        time=_time(clock),
                        call_id=call.id,
                        name=tool,
                        content=rng.choice(pool),
                        class_=class_,
                        untrusted=tool == "http_fetch",
                    )
                )
                secret = secret or class_ is Class.secret
            records.append(
                AssistantRecord(
                    time=_time(clock),
                    content=text.text(rng.randint(15, 100)),
                    reasoning_content=rng.choice(pool) if rng.random() < 0.5 else None,
                )
            )
            if not secret:
                made += 1
            out.extend(encoder.encode(r) + b"\n" for r in records)
        (directory / "0.jsonl").write_bytes(b"".join(out))
        lines += len(out)
        logs += 1
    archive = _archive(home, rng, text)
    return Corpus(logs, lines, made, archive, words, cum)


def _cumulative(words: list[str]) -> list[float]:
    return list(itertools.accumulate(1.0 / (r + 1) ** ZIPF_S for r in range(len(words))))


def described(
    logs: int,
    lines: int,
    rows: int,
    archive: int,
    *,
    seed: int = 20260924,
    vocab_size: int = 50_000,
) -> Corpus:
    """The `Corpus` that `generate` returned for these counts, without writing it again."""
    words = vocabulary(random.Random(seed), vocab_size)
    return Corpus(logs, lines, rows, archive, words, _cumulative(words))


def _archive(home: Path, rng: random.Random, text: _Text, count: int = 300) -> int:
    memory = home / "memory"
    memory.mkdir(parents=True, mode=0o700, exist_ok=True)
    moved = datetime(2024, 6, 1, tzinfo=UTC)
    records = [
        entries.archive_record(
            text.text(rng.randint(5, 40)),
            name=rng.choice(("memory.md", "user.md")),
            session=_session_id(rng),
            moved_at=moved + timedelta(hours=i),
        )
        for i in range(count)
    ]
    (memory / "archive.md").write_text("".join(records))
    return count


def content_queries(corpus: Corpus, n: int, seed: int = 7) -> Iterator[str]:
    """Queries of 1 to 3 content words (Zipf-weighted, the 150 most common words left out)."""
    rng = random.Random(seed)
    for _ in range(n):
        yield " ".join(corpus.words(rng, rng.randint(1, 3), skip=150))


def natural_queries(corpus: Corpus, n: int, seed: int = 11) -> Iterator[str]:
    """Questions as people type them: a question's opening, then 1 to 3 content words
    mixed with 0 to 4 words of the whole Zipf mix (the, of, and, …)."""
    rng = random.Random(seed)
    starts = ("what did we", "when did i", "where is the", "how do i", "what was the", "did we")
    for _ in range(n):
        words = corpus.words(rng, rng.randint(1, 3), skip=150)
        words += corpus.words(rng, rng.randint(0, 4))
        rng.shuffle(words)
        yield f"{rng.choice(starts)} {' '.join(words)}?"
