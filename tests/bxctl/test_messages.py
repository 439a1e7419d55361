"""The owner's CLI (issue 14): one home found without asking, and messages a person can act on.

Each test runs `bxctl` as the owner does, as a process, and checks the one line it prints
and its exit code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bxctl_run import write_session

import proto
from bxctl import _help
from bxctl._init import init_home

CAP_S = 30


def bxctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "BOXMAKER_HOME"}
    return subprocess.run(
        [sys.executable, "-m", "bxctl", *args],
        capture_output=True,
        text=True,
        timeout=CAP_S,
        env={**base, **(env or {})},
        check=False,
    )


@pytest.fixture
def home(short_dir: Path) -> Path:
    made = short_dir / "home"
    init_home(made, model_url="http://127.0.0.1:9/v1")
    return made


def session(home: Path, name: str) -> None:
    write_session(home, name, created="t")


# -- one home ---------------------------------------------------------------------------


def test_home_is_taken_before_or_after_the_command_and_from_the_environment(home: Path) -> None:
    session(home, "chat-abcdefghij")
    for args, env in (
        (["--home", str(home), "sessions", "list"], None),
        (["sessions", "list", "--home", str(home)], None),
        ([f"--home={home}", "sessions", "list"], None),
        (["sessions", "list"], {"BOXMAKER_HOME": str(home)}),
    ):
        done = bxctl(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout.startswith("chat-abcdefghij  created t"), args


def test_the_default_home_is_the_owners_and_a_missing_one_says_how_to_make_it(
    short_dir: Path,
) -> None:
    done = bxctl("sessions", "list", env={"HOME": str(short_dir)})
    assert done.returncode == 1
    default = short_dir / ".boxmaker"
    assert done.stderr == (
        f"bxctl: there is no boxmaker home at {default} (the default home). Make one there "
        f"with `bxctl init --home {default}` or `bxctl up --home {default}`; or name yours "
        "with --home or $BOXMAKER_HOME.\n"
    )
    typo = short_dir / "hoem"
    done = bxctl("memory", "show", "--home", str(typo))
    assert done.returncode == 1
    assert done.stderr.startswith(f"bxctl: there is no boxmaker home at {typo} (--home).")
    assert not typo.exists()  # nothing was made at the typo


@pytest.mark.parametrize("where", ["/proc/boxmaker", "/sys/boxmaker/home"])
def test_up_on_a_home_it_cannot_make_is_one_line(where: str) -> None:
    done = bxctl("up", "--home", where)
    assert done.returncode == 1
    assert done.stderr.startswith(f"bxctl: cannot make a boxmaker home at {where}: ")
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


# -- bxctl config -------------------------------------------------------------------------


def test_config_get_set_and_show(home: Path) -> None:
    toml = home / "config" / "loopd.toml"
    comments = [line for line in toml.read_text().splitlines() if line.lstrip().startswith("#")]
    assert bxctl("config", "get", "model.url", "--home", str(home)).stdout == (
        '"http://127.0.0.1:9/v1"\n'
    )
    done = bxctl("config", "set", "model.context_tokens", "16384", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"loopd.model.context_tokens = 16384 (was 8192) in {toml}",
        "restart loopd for it to take effect: Ctrl-C `bxctl up --home "
        f"{home}` and start it again, or `systemctl restart boxmaker-loopd`",
    ]
    after = toml.read_text()
    assert "context_tokens = 16384" in after
    assert [line for line in after.splitlines() if line.lstrip().startswith("#")] == comments
    assert proto.read_config(toml, proto.LoopdConfig).model.context_tokens == 16384
    shown = bxctl("config", "show", "--home", str(home)).stdout
    assert "loopd.model.context_tokens = 16384" in shown
    assert "brokerd.approvals.timeout_s = 900.0" in shown


def test_config_set_refuses_what_the_role_would_refuse(home: Path) -> None:
    toml = home / "config" / "loopd.toml"
    before = toml.read_text()
    done = bxctl("config", "set", "model.max_steps", "0", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr.startswith("bxctl: loopd would refuse model.max_steps = 0: expected `int`")
    assert done.stderr.endswith("; nothing was changed\n")
    assert toml.read_text() == before


def start_loopd(toml: Path) -> subprocess.CompletedProcess[str]:
    """loopd started on `toml`, as `bxctl up` starts it (one that starts is a failure)."""
    return subprocess.run(
        [sys.executable, "-m", "loopd", "serve", "--config", str(toml)],
        capture_output=True,
        text=True,
        timeout=20,
    )


@pytest.mark.parametrize("url", ["notaurl", "ftp://10.0.0.2/v1", "http://", "http://a b/v1"])
def test_a_model_url_is_refused_in_words_unless_http_or_embedded(home: Path, url: str) -> None:
    toml = home / "config" / "loopd.toml"
    before = toml.read_text()
    done = bxctl("config", "set", "model.url", url, "--home", str(home))
    assert done.stderr == (
        f"bxctl: loopd would refuse model.url = {url}: expected an http:// or https:// URL, "
        'or "embedded" - at `$.model.url`; nothing was changed\n'
    )
    assert done.returncode == 1
    assert toml.read_text() == before
    # loopd itself, started on such a file, says the same
    toml.write_text(re.sub(r"(?m)^url = .*$", f"url = {url!r}", before, count=1))
    started = start_loopd(toml)
    assert started.returncode == 1
    assert 'Expected an http:// or https:// URL, or "embedded" - at `$.model.url`' in (
        started.stderr
    )


def test_a_config_saved_with_a_byte_order_mark_is_refused_saying_so(home: Path) -> None:
    toml = home / "config" / "loopd.toml"
    toml.write_bytes(b"\xef\xbb\xbf" + toml.read_bytes())
    started = start_loopd(toml)
    assert started.returncode == 1
    assert (
        f"cannot start: config {toml}: it starts with a byte-order mark (U+FEFF, which some "
        "editors add); save it as UTF-8 without one (runbook: loopd-start-failed)"
    ) in started.stderr


def test_an_unknown_key_suggests_the_nearest_and_an_ambiguous_one_asks_which(home: Path) -> None:
    done = bxctl("config", "get", "model.ur", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr.startswith("bxctl: no setting model.ur; did you mean model.url")
    done = bxctl("config", "get", "sockets.drain_s", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr == (
        "bxctl: sockets.drain_s is in several roles' configs; say which: "
        "memoryd.sockets.drain_s, brokerd.sockets.drain_s, loopd.sockets.drain_s, "
        "mattermost.sockets.drain_s\n"
    )
    assert bxctl("config", "get", "loopd.sockets.drain_s", "--home", str(home)).stdout == "20.0\n"


def comments_of(toml: Path) -> list[str]:
    """The comments of a TOML file, in order, without the values before them."""
    return [line.partition("#")[2] for line in toml.read_text().splitlines() if "#" in line]


def with_bridge(home: Path) -> Path:
    """`home` with the shipped mattermost.toml, as `bxctl init --mattermost-url` leaves it."""
    toml = home / "config" / "mattermost.toml"
    toml.write_text((Path(__file__).parents[2] / "config" / "mattermost.toml").read_text())
    return toml


@pytest.mark.parametrize(
    ("key", "value", "file", "role", "shown"),
    [
        ("memoryd.index.max_class", '"public"', "memoryd", "memoryd", '"public" (was "private")'),
        ("approvals.timeout_s", "600", "brokerd", "brokerd", "600.0 (was 900.0)"),
        ("model.max_steps", "8", "loopd", "loopd", "8 (was 16)"),
        ("server.heartbeat_s", "60", "mattermost", "mattermostd", "60.0 (was 30.0)"),
        ("mattermost.reply.update_s", "2.5", "mattermost", "mattermostd", "2.5 (was 1.0)"),
        (
            "mattermostd.listen.channel",
            "abcdefghijklmnopqrstuvwxyz",
            "mattermost",
            "mattermostd",
            '"abcdefghijklmnopqrstuvwxyz" (was (not set))',
        ),
    ],
)
def test_config_sets_a_key_in_each_roles_file_keeping_its_comments(
    home: Path, key: str, value: str, file: str, role: str, shown: str
) -> None:
    with_bridge(home)
    toml = home / "config" / f"{file}.toml"
    comments = comments_of(toml)
    done = bxctl("config", "set", key, value, "--home", str(home))
    assert done.returncode == 0, done.stderr
    section, name = key.split(".")[-2:]
    assert done.stdout.splitlines() == [
        f"{file}.{section}.{name} = {shown} in {toml}",
        f"restart {role} for it to take effect: Ctrl-C `bxctl up --home {home}` and start it "
        f"again, or `systemctl restart boxmaker-{role}`",
    ]
    assert comments_of(toml) == comments
    got = bxctl("config", "get", f"{file}.{section}.{name}", "--home", str(home))
    assert got.stdout == shown.split(" (was ")[0] + "\n"


def test_config_refuses_a_bridge_value_in_words_and_keeps_the_file(home: Path) -> None:
    toml = with_bridge(home)
    before = toml.read_text()
    done = bxctl("config", "set", "owner.user_id", "alice", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr == (
        "bxctl: mattermost would refuse owner.user_id = alice: expected a Mattermost id (26 "
        "lowercase letters and digits) - at `$.owner.user_id`; nothing was changed\n"
    )
    done = bxctl("config", "set", "server.heartbeat_s", "0", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr.endswith("- at `$.server.heartbeat_s`; nothing was changed\n")
    assert toml.read_text() == before


def test_config_of_a_bridge_not_set_up_says_how_to_set_it_up(home: Path) -> None:
    toml = home / "config" / "mattermost.toml"
    sentence = (
        f"there is no {toml}: the Mattermost bridge is not set up. Set it up with `bxctl init "
        f"--mattermost-url URL --token-file FILE --owner USERNAME --home {home}` "
        "(docs/mattermost.md)"
    )
    for args in (["set", "server.heartbeat_s", "60"], ["get", "mattermost.server.url"]):
        done = bxctl("config", *args, "--home", str(home))
        assert done.returncode == 1
        assert done.stderr == f"bxctl: {sentence}\n"
    assert not toml.exists()
    shown = bxctl("config", "show", "--home", str(home))
    assert shown.returncode == 0, shown.stderr
    assert f"# mattermost: {sentence}" in shown.stdout
    assert "loopd.model.url = " in shown.stdout


def test_init_on_a_home_points_at_config_set(home: Path) -> None:
    done = bxctl("init", "--home", str(home), "--model-url", "http://10.0.0.2:8000/v1")
    assert done.returncode == 0
    assert done.stdout == (
        f"{home} is already a home: its model did not change. To change it: "
        f"`bxctl config set model.url http://10.0.0.2:8000/v1 --home {home}`\n"
    )


# -- sessions by a prefix ---------------------------------------------------------------


def test_a_unique_prefix_names_a_session_as_recall_prints_it(home: Path) -> None:
    session(home, "chat-k6m5ert76psohrmw5uwb2ibpb4")
    session(home, "chat-k7aaaaaaaaaaaaaaaaaaaaaaaa")
    for given in ("chat-k6m5", "chat-k6m5…", "chat-k6m5ert76psohrmw5uwb2ibpb4"):
        done = bxctl("sessions", "show", given, "--home", str(home))
        assert done.returncode == 0, (given, done.stderr)
        assert done.stdout.startswith("session chat-k6m5ert76psohrmw5uwb2ibpb4,"), given
    done = bxctl("sessions", "show", "chat-k", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr.startswith("bxctl: chat-k is the start of 2 sessions (")
    done = bxctl("sessions", "show", "chat-zz", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr == (
        f"bxctl: no session chat-zz in {home}; `bxctl sessions list --home {home}` shows them\n"
    )


def test_an_argument_with_escapes_is_shown_rendered_once(home: Path) -> None:
    session(home, "chat-k6m5ert76psohrmw5uwb2ibpb4")
    for given in ("\x1b[2J", "chat-k\u202e"):
        shown = proto.for_terminal(given, one_line=True)  # \u{1b}[2J, not \\u{1b}[2J
        done = bxctl("sessions", "show", given, "--home", str(home))
        assert done.stderr.startswith(f"bxctl: no session {shown} in "), done.stderr
    done = bxctl("config", "get", "model.\x1b[2J", "--home", str(home))
    shown = proto.for_terminal("model.\x1b[2J", one_line=True)
    assert done.stderr.startswith(f"bxctl: no setting {shown};"), done.stderr


def test_a_long_mistyped_id_is_repeated_short(home: Path) -> None:
    given = "chat-" + "k" * 5000
    done = bxctl("sessions", "show", given, "--home", str(home))
    assert done.returncode == 1
    assert done.stderr.startswith(f"bxctl: no session {given[:64]}… (5,005 characters) in ")


def test_chat_with_an_unknown_session_does_not_start_one(home: Path) -> None:
    done = bxctl("chat", "--session", "chat-typo", "-m", "hi", "--home", str(home))
    assert done.returncode == 1
    assert done.stderr.startswith("bxctl: no session chat-typo in ")
    assert not (home / "sessions" / "chat-typo").exists()


# -- arguments in words ----------------------------------------------------------------


def test_recall_k_out_of_range_says_the_range_in_words(home: Path) -> None:
    done = bxctl("recall", "Heron", "launch", "-k", "50", "--home", str(home))
    assert (done.returncode, done.stderr) == (
        1,
        "bxctl: -k is how many hits to show, 1 to 10; 50 is not\n",
    )


def test_an_unknown_choice_lists_the_choices(home: Path) -> None:
    done = bxctl("memory", "history", "--file", "soul", "--home", str(home))
    assert done.returncode == 2  # a usage error, as argparse and cyclopts say it
    assert 'Invalid value "soul" for --file. Choose from: "memory", "user".' in done.stderr


def test_a_closed_pipe_ends_quietly(home: Path) -> None:
    for n in range(40):
        session(home, f"chat-pipe{n:04d}aaaa")
    command = [sys.executable, "-m", "bxctl", "sessions", "list", "--home", str(home)]
    listing = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert listing.stdout is not None
    assert listing.stdout.readline()  # read one line, then hang up as `head -1` does
    listing.stdout.close()
    _, err = listing.communicate(timeout=CAP_S)
    assert b"BrokenPipeError" not in err
    assert b"Traceback" not in err


# -- help ---------------------------------------------------------------------------------


def test_help_lists_up_and_chat_first_then_the_nouns() -> None:
    done = bxctl("--help")
    assert done.returncode == 0
    commands = [
        line.split()[1]
        for line in done.stdout.splitlines()
        if line.startswith("│ ") and line[2] != " "
    ]
    assert commands[:3] == ["up", "chat", "init"]
    assert done.stdout == _help.ROOT_HELP


def test_the_stored_root_help_is_cyclopts_own() -> None:
    assert _help.render() == _help.ROOT_HELP, "run `uv run python -m bxctl._help`"


@pytest.mark.parametrize(
    "command",
    [
        ["up"],
        ["chat"],
        ["init"],
        ["approvals", "list"],
        ["approvals", "approve"],
        ["approvals", "deny"],
        ["memory", "show"],
        ["memory", "history"],
        ["memory", "forget"],
        ["recall"],
        ["sessions", "list"],
        ["sessions", "show"],
        ["config", "show"],
        ["config", "get"],
        ["config", "set"],
        ["grants"],
        ["audit", "verify"],
        ["audit", "tail"],
        ["reindex"],
        ["baseline"],
    ],
    ids=" ".join,
)
def test_every_command_help_has_an_example(command: list[str]) -> None:
    done = bxctl(*command, "--help", env={"COLUMNS": "100"})
    assert done.returncode == 0
    assert "Example: bxctl " + command[0] in done.stdout
