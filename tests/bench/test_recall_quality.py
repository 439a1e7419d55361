"""`bench recall-quality`'s pure part (`bench/_locomo.py`): evidence ids, R@k, the records.

bench/ is not on the tests' import path (and `bench` here would name this folder), so
the module is loaded from its file; it imports nothing of bench.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from hypothesis import given
from hypothesis import strategies as st

from proto import AssistantRecord, UserRecord

_PATH = Path(__file__).resolve().parents[2] / "bench" / "_locomo.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_locomo_under_test", _PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


locomo = _load()


def test_the_malformed_evidence_ids_of_the_data_are_mended() -> None:
    assert locomo.evidence_ids(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert locomo.evidence_ids(["D:11:26"]) == ["D11:26"]
    assert locomo.evidence_ids(["D30:05", "D30:5"]) == ["D30:5"]
    assert locomo.evidence_ids(["", "nothing"]) == []


_ID = st.tuples(st.integers(0, 999), st.integers(0, 999))


@given(
    ids=st.lists(
        st.tuples(_ID, st.sampled_from(["D", "D:"]), st.integers(0, 2)), min_size=1, max_size=6
    ),
    separator=st.sampled_from(["; ", ";", ", ", " "]),
    grouped=st.booleans(),
)
def test_every_id_written_any_way_is_read_once_and_canonical(
    ids: list[tuple[tuple[int, int], str, int]], separator: str, grouped: bool
) -> None:
    written = [f"{prefix}{'0' * zeros}{s}:{'0' * zeros}{t}" for (s, t), prefix, zeros in ids]
    raw = [separator.join(written)] if grouped else written
    expected = list(dict.fromkeys(f"D{s}:{t}" for (s, t), _, _ in ids))
    assert locomo.evidence_ids(raw) == expected


def _question(evidence: tuple[str, ...], category: int = 4) -> object:
    return locomo.Question(conversation="c", text="q", category=category, evidence=evidence)


def test_found_at_any_and_all() -> None:
    ranked = ["a", None, "b", "c", "d", "e"]
    assert locomo.found_at(ranked, ["b", "x"], 5) == (True, False)
    assert locomo.found_at(ranked, ["b", "c"], 5) == (True, True)
    assert locomo.found_at(ranked, ["e"], 5) == (False, False)
    assert locomo.found_at(ranked, ["e"], 6) == (True, True)
    assert locomo.found_at([], ["a"], 10) == (False, False)


def test_score_overall_and_per_category() -> None:
    questions = [
        _question(("a",), 1),
        _question(("b", "z"), 2),
        _question(("y",), 2),
        _question(("f",), 4),
    ]
    ranked = [["a"], ["b", "z"], ["x"], ["1", "2", "3", "4", "5", "f"]]
    scores = locomo.score(questions, ranked, (5, 10))
    assert scores.questions == 4
    assert scores.any_at == {5: 0.5, 10: 0.75}
    assert scores.all_at == {5: 0.5, 10: 0.75}
    assert scores.category_any_at[2] == {5: 0.5, 10: 0.5}
    assert scores.category_any_at[4] == {5: 0.0, 10: 1.0}
    assert scores.category_questions == {1: 1, 2: 2, 3: 0, 4: 1}


def test_a_conversation_becomes_records_one_a_minute(tmp_path: Path) -> None:
    data = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_2_date_time": "9:05 am on 3 June, 2023",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Later."}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Look.", "blip_caption": "a red kite"},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Nice."},
        ],
        "session_3_date_time": "1:00 pm on 1 July, 2023",
        "session_1_summary": "not a session",
        "qa": [
            {"question": "Where?", "answer": "x", "evidence": ["D1:02; D:2:1"], "category": 1},
            {"question": "Who?", "answer": "y", "evidence": ["D9:9"], "category": 4},
            {"question": "Not?", "answer": "z", "evidence": ["D1:1"], "category": 5},
        ],
    }
    path = tmp_path / "7.json"
    path.write_text(json.dumps(data))
    conversation = locomo.load(path)

    assert [s.number for s in conversation.sessions] == [1, 2]
    assert conversation.turns == 4
    assert conversation.sessions[0].started == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert [q.evidence for q in conversation.questions] == [("D1:2", "D2:1")]
    assert conversation.questions[0].conversation == "7"
    assert conversation.dropped == 1

    records = locomo.session_records(conversation, conversation.sessions[0])
    assert records == [
        UserRecord(time="2023-05-08T13:56:00Z", content="Ann: Hi Bo!"),
        AssistantRecord(
            time="2023-05-08T13:57:00Z", content="Bo: Look. [shares a photo: a red kite]"
        ),
        UserRecord(time="2023-05-08T13:58:00Z", content="Ann: Nice."),
    ]
    later = locomo.session_records(conversation, conversation.sessions[1])
    assert later == [AssistantRecord(time="2023-06-03T09:05:00Z", content="Bo: Later.")]
