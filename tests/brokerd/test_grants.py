"""Grant files: the built-in grants, load problems, constraints, and the parser's contract."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokerd._grants import (
    BUILT_IN_POLICY,
    BUILTIN_MEMORY_TEXT,
    BUILTIN_RECALL_TEXT,
    GrantInvalid,
    load_grants,
    parse_grant,
)
from proto import Class, GrantProblem

# The fixed sentence, character for character (each line ends with a newline, the last one too).
SPEC_RECALL = """# built in: recall
tool = "recall"
mode = "auto"
max_taint = "secret"
result_class = "private"
untrusted = false
"""
SPEC_MEMORY = """# built in: memory
tool = "memory"
mode = "ask"
max_taint = "secret"
result_class = "private"
untrusted = false
"""

FETCH = """\
tool = "http_fetch"
mode = "auto"
max_taint = "private"
result_class = "public"
untrusted = true
[constraints]
hosts = ["example.org"]
"""


def grant(tool: str, mode: str = "auto", extra: str = "") -> str:
    return (
        f'tool = "{tool}"\nmode = "{mode}"\nmax_taint = "private"\n'
        f'result_class = "private"\nuntrusted = false\n{extra}'
    )


def write(directory: Path, name: str, text: str | bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    (directory / name).write_bytes(data)


def test_builtin_texts_are_the_spec_text() -> None:
    assert BUILTIN_RECALL_TEXT == SPEC_RECALL
    assert BUILTIN_MEMORY_TEXT == SPEC_MEMORY


@pytest.mark.parametrize("exists", [False, True])
def test_builtin_grants_are_present_with_an_empty_grants_dir(tmp_path: Path, exists: bool) -> None:
    grants_dir = tmp_path / "grants"
    if exists:
        grants_dir.mkdir()
    loaded = load_grants(grants_dir)
    assert loaded.problems == ()
    (recall,), (memory,) = loaded.find("recall"), loaded.find("memory")
    assert (recall.name, recall.mode, recall.builtin) == ("builtin-recall", "auto", True)
    assert (memory.name, memory.mode, memory.builtin) == ("builtin-memory", "ask", True)
    assert recall.grant_sha256 == hashlib.sha256(SPEC_RECALL.encode()).hexdigest()
    assert memory.grant_sha256 == hashlib.sha256(SPEC_MEMORY.encode()).hexdigest()
    for builtin in (recall, memory):
        assert (builtin.max_taint, builtin.result_class) == (Class.secret, Class.private)
        assert builtin.untrusted is False
        assert (builtin.paths, builtin.hosts, builtin.patterns) == ((), frozenset(), ())
    assert [g.name for g in loaded.infos()] == ["builtin-memory", "builtin-recall"]


@pytest.mark.parametrize("tool", ["recall", "memory"])
@pytest.mark.parametrize("mode", ["auto", "ask", "deny"])
def test_a_grant_file_naming_recall_or_memory_is_refused(
    tmp_path: Path, tool: str, mode: str
) -> None:
    write(tmp_path, f"my-{tool}.toml", grant(tool, mode))
    write(tmp_path, "web.toml", FETCH)
    loaded = load_grants(tmp_path)
    assert loaded.problems == (GrantProblem(file=f"my-{tool}.toml", message=BUILT_IN_POLICY),)
    assert BUILT_IN_POLICY == "the policy of recall and memory is built in; remove this grant."
    (found,) = loaded.find(tool)
    assert found.builtin
    assert found.name == f"builtin-{tool}"
    (web,) = loaded.find("http_fetch")
    assert web.name == "web"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (grant("shell") + "colour = 'blue'\n", "object contains unknown field `colour`"),
        (grant("shell", "sometimes"), "invalid enum value 'sometimes' - at `$.mode`"),
        (grant("shell").replace('"private"', '"topsecret"', 1), "at `$.max_taint`"),
        (
            grant("shell") + "[constraints]\nport = [1]\n",
            "unknown field `port` - at `$.constraints`",
        ),
        ('tool = "shell"\nmode = "auto"\n', "object missing required field `max_taint`"),
        (grant("Shell"), "at `$.tool`"),
        (grant("shell") + "[constraints\n", "expected"),
        (b"tool = '\xff'\n", ""),
        (b"\xef\xbb\xbf" + grant("shell").encode(), "starts with a byte-order mark (U+FEFF"),
        (grant("read_file"), "read_file needs [constraints] paths"),
        (grant("http_fetch", extra='[constraints]\npaths = ["/x"]\n'), "takes no paths"),
        (grant("read_file", extra='[constraints]\npaths = ["notes/**"]\n'), "not absolute"),
        (grant("read_file", extra='[constraints]\npaths = ["/a/../etc"]\n'), "not normalised"),
        (grant("read_file", extra='[constraints]\npaths = ["/a/x**"]\n'), "whole segment"),
        (grant("http_fetch", extra='[constraints]\nhosts = ["Ex.org"]\n'), "not a lower-case"),
        (grant("http_fetch", extra='[constraints]\nhosts = ["http://ex.org"]\n'), "host"),
    ],
)
def test_bad_grant_files_are_problems_and_the_others_load(
    tmp_path: Path, text: str | bytes, says: str
) -> None:
    write(tmp_path, "bad.toml", text)
    write(tmp_path, "web.toml", FETCH)
    loaded = load_grants(tmp_path)
    assert [p.file for p in loaded.problems] == ["bad.toml"]
    assert says in loaded.problems[0].message
    assert [g.name for g in loaded.find("http_fetch")] == ["web"]
    assert loaded.find("shell") == ()


def test_two_files_for_one_tool_leave_it_without_a_grant(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", grant("shell"))
    write(tmp_path, "b.toml", grant("shell", "ask"))
    write(tmp_path, "c.toml", grant("web_search"))
    loaded = load_grants(tmp_path)
    assert [p.file for p in loaded.problems] == ["a.toml", "b.toml"]
    assert loaded.problems[0].message == (
        "a.toml, b.toml all grant shell; keep one (only http_fetch, list_dir, read_file "
        "grants can share a tool, told apart by their paths or hosts); until then shell "
        "has no grant"
    )
    assert loaded.find("shell") == ()
    assert [g.name for g in loaded.find("web_search")] == ["c"]


def test_file_and_web_tools_may_have_several_grants(tmp_path: Path) -> None:
    write(tmp_path, "web.toml", FETCH)
    write(tmp_path, "local-web.toml", FETCH.replace("example.org", "127.0.0.1:8080"))
    loaded = load_grants(tmp_path)
    assert loaded.problems == ()
    assert [g.name for g in loaded.find("http_fetch")] == ["local-web", "web"]
    assert [g.name for g in loaded.infos()] == [
        "builtin-memory",
        "builtin-recall",
        "local-web",
        "web",
    ]


def test_builtin_names_are_reserved_and_other_files_ignored(tmp_path: Path) -> None:
    write(tmp_path, "builtin-notes.toml", grant("shell"))
    write(tmp_path, "README.md", "not a grant")
    (tmp_path / "dir.toml").mkdir()
    loaded = load_grants(tmp_path)
    assert [p.file for p in loaded.problems] == ["builtin-notes.toml", "dir.toml"]
    assert loaded.find("shell") == ()


def test_a_grant_is_named_by_its_stem_and_hashed_by_its_bytes(tmp_path: Path) -> None:
    text = "# fetch a page\n" + FETCH
    write(tmp_path, "web-pages.toml", text)
    (found,) = load_grants(tmp_path).find("http_fetch")
    assert found.name == "web-pages"
    assert found.grant_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert found.hosts == frozenset({"example.org"})
    assert found.label.describe() == "public · untrusted"


def test_unknown_tools_may_carry_any_constraint() -> None:
    extra = '[constraints]\npatterns = ["git *"]\nhosts = ["example.org"]\n'
    loaded = parse_grant("shell", grant("shell", "ask", extra).encode())
    assert loaded.patterns == ("git *",)


def test_the_shipped_example_grants_load() -> None:
    shipped = Path(__file__).resolve().parents[2] / "config" / "grants"
    loaded = load_grants(shipped)
    assert loaded.problems == ()
    (read,), (fetch,) = loaded.find("read_file"), loaded.find("http_fetch")
    assert read.mode == "ask"
    assert read.paths
    assert (fetch.mode, fetch.untrusted, fetch.result_class) == ("auto", True, Class.public)


@given(st.binary(max_size=300))
def test_any_bytes_give_a_grant_or_a_refusal(data: bytes) -> None:
    try:
        parse_grant("x", data)
    except GrantInvalid as exc:
        refusal = str(exc)
    else:
        return
    assert refusal


_tools = st.sampled_from(["shell", "read_file", "list_dir", "http_fetch", "recall", "memory"])
_classes = st.sampled_from(["public", "private", "secret"])
_globs = st.lists(
    st.lists(st.sampled_from(["a", "b c", "*", "?x", "**", "é"]), min_size=1, max_size=4).map(
        lambda parts: "/" + "/".join(parts)
    ),
    max_size=3,
)
_hosts = st.lists(st.sampled_from(["example.org", "a-b.example", "[::1]:8080", "h:1"]), max_size=3)


@given(
    _tools,
    st.sampled_from(["auto", "ask", "deny"]),
    _classes,
    _classes,
    st.booleans(),
    _globs,
    _hosts,
)
def test_generated_grant_files_load_as_written_or_are_refused_for_their_tool(
    tool: str,
    mode: str,
    max_taint: str,
    result_class: str,
    untrusted: bool,
    paths: list[str],
    hosts: list[str],
) -> None:
    text = (
        f'tool = "{tool}"\nmode = "{mode}"\nmax_taint = "{max_taint}"\n'
        f'result_class = "{result_class}"\nuntrusted = {str(untrusted).lower()}\n'
        f"[constraints]\npaths = {paths!r}\nhosts = {hosts!r}\n".replace("'", '"')
    )
    takes = {"read_file": {"paths"}, "list_dir": {"paths"}, "http_fetch": {"hosts"}}
    given_keys = {k for k, v in (("paths", paths), ("hosts", hosts)) if v}
    refusal: str | None = None
    try:
        loaded = parse_grant("g", text.encode())
    except GrantInvalid as exc:
        refusal = str(exc)
    if tool in ("recall", "memory"):
        assert refusal == BUILT_IN_POLICY
        return
    if refusal is not None:
        assert tool in takes
        assert given_keys != takes[tool]
        return
    assert tool not in takes or given_keys == takes[tool]
    assert (loaded.tool, loaded.mode, loaded.untrusted) == (tool, mode, untrusted)
    assert (loaded.max_taint, loaded.result_class) == (Class(max_taint), Class(result_class))
    assert [g.pattern for g in loaded.paths] == paths
    assert loaded.hosts == frozenset(hosts)
    assert loaded.grant_sha256 == hashlib.sha256(text.encode()).hexdigest()
