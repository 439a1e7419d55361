"""Every role's configuration file, as the Structs it is decoded into.

They live in proto, not in the roles, so that bxctl reads and checks a role's TOML
(`bxctl config`, whether the embedded model is configured) with the role's own Struct,
without importing the role. Each role resolves its Struct into absolute paths itself.

Defaults live here and nowhere else; the shipped files in `config/` show them. Unknown
keys are errors naming the key (`ConfigSection` forbids them), so a typo fails at start,
and every duration and count is checked to be positive.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ._config import PATTERN_MEANINGS, ConfigSection, PathsSection
from ._home import DEFAULT_DRAIN_S
from ._label import Class

__all__ = [
    "EMBEDDED",
    "EMBEDDED_URL_ENV",
    "BrokerdConfig",
    "FunctionWordsLanguage",
    "LoopdConfig",
    "LoopdModel",
    "MattermostConfig",
    "MattermostId",
    "MemorydConfig",
    "MemorydRecall",
    "PositiveCount",
    "PositiveSeconds",
    "RecallRanking",
]

PositiveSeconds = Annotated[float, msgspec.Meta(gt=0)]
"""A duration in seconds, more than zero."""

PositiveCount = Annotated[int, msgspec.Meta(ge=1)]
"""A count, at least one."""

EMBEDDED = "embedded"
"""`[model] url` of the embedded demo model, which `bxctl up` runs."""

EMBEDDED_URL_ENV = "BOXMAKER_EMBEDDED_MODEL_URL"
"""Where `bxctl up` tells loopd the embedded model's address."""

_HTTP_URL = r"https?://[^\s/]+(/\S*)?"
URL_PATTERN = rf"^{_HTTP_URL}$"
MODEL_URL_PATTERN = rf"^({EMBEDDED}|{_HTTP_URL})$"
PATTERN_MEANINGS[URL_PATTERN] = "an http:// or https:// URL"
PATTERN_MEANINGS[MODEL_URL_PATTERN] = f'an http:// or https:// URL, or "{EMBEDDED}"'


# -- memoryd.toml -----------------------------------------------------------


class MemorydMemory(ConfigSection, frozen=True, kw_only=True):
    """`[memory]`: the starter soul.md, relative to the config file's directory."""

    soul_starter: str = "soul.md"


class MemorydIndex(ConfigSection, frozen=True, kw_only=True):
    """`[index]`: records above `max_class` are not indexed."""

    max_class: Class = Class.private


RecallRanking = Literal["context", "spec"]
"""How recall ranks: `context` (stems, the turn a reply answers, function words left out
of the query, hits of one session raising each other) or `spec` (the spec's bm25 OR
query over every term, as it is)."""


FunctionWordsLanguage = Literal["en", "de", "fr", "es"]
"""A language whose function words the context ranking leaves out of a query."""


class MemorydRecall(ConfigSection, frozen=True, kw_only=True):
    """`[recall]`: how recall ranks its hits, and the languages the owner writes."""

    ranking: RecallRanking = "context"
    languages: list[FunctionWordsLanguage] = msgspec.field(default_factory=lambda: ["en"])


class MemorydSockets(ConfigSection, frozen=True, kw_only=True):
    """`[sockets]`: socket paths; defaults under `{home}/run/`."""

    loop: str | None = None
    broker: str | None = None
    admin: str | None = None
    read_timeout_s: PositiveSeconds = 10.0
    drain_s: PositiveSeconds = DEFAULT_DRAIN_S


class MemorydKeys(ConfigSection, frozen=True, kw_only=True):
    """`[keys]`: the approval key brokerd signs approved calls with (default under home)."""

    approval: str | None = None


class MemorydPeers(ConfigSection, frozen=True, kw_only=True):
    """`[peers]`: the users allowed on each socket besides memoryd's own (and root)."""

    loop: list[str] = msgspec.field(default_factory=list)
    broker: list[str] = msgspec.field(default_factory=list)
    admin: list[str] = msgspec.field(default_factory=list)


class MemorydConfig(ConfigSection, frozen=True, kw_only=True):
    """The whole of memoryd.toml."""

    paths: PathsSection = msgspec.field(default_factory=PathsSection)
    memory: MemorydMemory = msgspec.field(default_factory=MemorydMemory)
    index: MemorydIndex = msgspec.field(default_factory=MemorydIndex)
    recall: MemorydRecall = msgspec.field(default_factory=MemorydRecall)
    sockets: MemorydSockets = msgspec.field(default_factory=MemorydSockets)
    keys: MemorydKeys = msgspec.field(default_factory=MemorydKeys)
    peers: MemorydPeers = msgspec.field(default_factory=MemorydPeers)


# -- brokerd.toml ----------------------------------------------------


class BrokerdMemory(ConfigSection, frozen=True, kw_only=True):
    """`[memory]`: memoryd's broker socket, where recall and memory calls go."""

    socket: str | None = None
    call_timeout_s: PositiveSeconds = 30.0


class BrokerdRuntime(ConfigSection, frozen=True, kw_only=True):
    """`[runtime]`: what runs every tool but recall and memory."""

    kind: Literal["local", "refusing"] = "local"


class BrokerdApprovals(ConfigSection, frozen=True, kw_only=True):
    """`[approvals]`: how long an `ask` call waits for the owner before it is denied."""

    timeout_s: PositiveSeconds = 900.0


class BrokerdLoop(ConfigSection, frozen=True, kw_only=True):
    """`[loop]`: loopd's broker socket, where a forget asks loopd for its part."""

    socket: str | None = None
    call_timeout_s: PositiveSeconds = 120.0


class BrokerdSockets(ConfigSection, frozen=True, kw_only=True):
    """`[sockets]`: socket paths; defaults under `{home}/run/`."""

    loop: str | None = None
    admin: str | None = None
    read_timeout_s: PositiveSeconds = 10.0
    drain_s: PositiveSeconds = DEFAULT_DRAIN_S


class BrokerdKeys(ConfigSection, frozen=True, kw_only=True):
    """`[keys]`: the approval key (shared with memoryd) and the audit key (brokerd's own)."""

    approval: str | None = None
    audit: str | None = None


class BrokerdPeers(ConfigSection, frozen=True, kw_only=True):
    """`[peers]`: the users allowed on each socket besides brokerd's own (and root)."""

    loop: list[str] = msgspec.field(default_factory=list)
    admin: list[str] = msgspec.field(default_factory=list)


class BrokerdConfig(ConfigSection, frozen=True, kw_only=True):
    """The whole of brokerd.toml."""

    paths: PathsSection = msgspec.field(default_factory=PathsSection)
    memory: BrokerdMemory = msgspec.field(default_factory=BrokerdMemory)
    loop: BrokerdLoop = msgspec.field(default_factory=BrokerdLoop)
    runtime: BrokerdRuntime = msgspec.field(default_factory=BrokerdRuntime)
    approvals: BrokerdApprovals = msgspec.field(default_factory=BrokerdApprovals)
    sockets: BrokerdSockets = msgspec.field(default_factory=BrokerdSockets)
    keys: BrokerdKeys = msgspec.field(default_factory=BrokerdKeys)
    peers: BrokerdPeers = msgspec.field(default_factory=BrokerdPeers)


# -- loopd.toml --------------------------------------------------


class LoopdModel(ConfigSection, frozen=True, kw_only=True):
    """`[model]`: an OpenAI-compatible chat completions server."""

    url: Annotated[str, msgspec.Meta(pattern=MODEL_URL_PATTERN)] = EMBEDDED
    """The server's OpenAI-compatible base URL (http or https), or "embedded": the demo
    model `bxctl up` runs, whose address it passes in `$BOXMAKER_EMBEDDED_MODEL_URL`."""
    model: str = "local"
    api_key_env: str | None = None
    context_tokens: PositiveCount = 8192
    max_tokens: PositiveCount = 1024
    temperature: Annotated[float, msgspec.Meta(ge=0)] = 0.2
    timeout_s: PositiveSeconds = 120.0
    stream: bool = True
    null_content: bool = False
    tool_choice: Literal["auto", "none"] | None = None
    """"auto" lets the model call tools; "none" asks for text only. Default: "auto", or
    "none" for the embedded demo model, which calls tools badly and constantly."""
    max_steps: PositiveCount = 16


class LoopdMemory(ConfigSection, frozen=True, kw_only=True):
    """`[memory]`: memoryd's loop socket."""

    socket: str | None = None


class LoopdBroker(ConfigSection, frozen=True, kw_only=True):
    """`[broker]`: brokerd's loop socket, and how long a call may take there.

    An `ask` call waits for the owner (brokerd's `[approvals] timeout_s`, 900 s by
    default) and then runs, so the default is that and a minute's margin.
    """

    socket: str | None = None
    call_timeout_s: PositiveSeconds = 960.0


class LoopdPrompt(ConfigSection, frozen=True, kw_only=True):
    """`[prompt]`: system.md, relative to the config file's directory."""

    system: str = "system.md"


class LoopdSockets(ConfigSection, frozen=True, kw_only=True):
    """`[sockets]`: the sockets loopd serves: the owner's chat, and brokerd's (forget)."""

    chat: str | None = None
    broker: str | None = None
    read_timeout_s: PositiveSeconds = 10.0
    drain_s: PositiveSeconds = DEFAULT_DRAIN_S


class LoopdPeers(ConfigSection, frozen=True, kw_only=True):
    """`[peers]`: the users allowed on each socket besides loopd's own (and root)."""

    chat: list[str] = msgspec.field(default_factory=list)
    broker: list[str] = msgspec.field(default_factory=list)


class LoopdConfig(ConfigSection, frozen=True, kw_only=True):
    """The whole of loopd.toml."""

    paths: PathsSection = msgspec.field(default_factory=PathsSection)
    model: LoopdModel = msgspec.field(default_factory=LoopdModel)
    memory: LoopdMemory = msgspec.field(default_factory=LoopdMemory)
    broker: LoopdBroker = msgspec.field(default_factory=LoopdBroker)
    prompt: LoopdPrompt = msgspec.field(default_factory=LoopdPrompt)
    sockets: LoopdSockets = msgspec.field(default_factory=LoopdSockets)
    peers: LoopdPeers = msgspec.field(default_factory=LoopdPeers)


# -- mattermost.toml (issue 15; docs/mattermost.md) ------------------------------------

MATTERMOST_ID_PATTERN = r"^[a-z0-9]{26}$"
PATTERN_MEANINGS[MATTERMOST_ID_PATTERN] = "a Mattermost id (26 lowercase letters and digits)"
MattermostId = Annotated[str, msgspec.Meta(pattern=MATTERMOST_ID_PATTERN)]
"""A Mattermost id (user, channel, post): 26 lowercase letters and digits."""


class MattermostServer(ConfigSection, frozen=True, kw_only=True):
    """`[server]`: the Mattermost server and the bot account's token.

    The token is never in this file: `token_file` names a file of mode 0600 holding it
    (relative to this file's folder).
    """

    url: Annotated[str, msgspec.Meta(pattern=URL_PATTERN)]
    token_file: str
    timeout_s: PositiveSeconds = 30.0
    heartbeat_s: PositiveSeconds = 30.0
    """How often the bridge checks that the stream is alive and the token still accepted
    (a revoked token's stream just goes quiet)."""


class MattermostOwner(ConfigSection, frozen=True, kw_only=True):
    """`[owner]`: the one Mattermost user the bridge listens to."""

    user_id: MattermostId
    username: str = ""
    """For messages only; `user_id` is what counts (a username can be changed)."""


class MattermostListen(ConfigSection, frozen=True, kw_only=True):
    """`[listen]`: besides the owner's direct channel with the bot, one channel (by id)."""

    channel: MattermostId | None = None


class MattermostReply(ConfigSection, frozen=True, kw_only=True):
    """`[reply]`: how a streaming reply is shown."""

    update_s: PositiveSeconds = 1.0
    """How often the reply post is edited while the answer streams (at most)."""


class MattermostSockets(ConfigSection, frozen=True, kw_only=True):
    """`[sockets]`: the owner sockets the bridge uses (defaults under `{home}/run/`)."""

    loop: str | None = None
    broker: str | None = None
    memory: str | None = None
    """memoryd's owner socket, for the owner's `!why`, `!forget` and `!undo`."""
    drain_s: PositiveSeconds = DEFAULT_DRAIN_S
    call_timeout_s: PositiveSeconds = 30.0
    """How long loopd or brokerd may take to answer one call (opening a session, a
    decision); a turn's own wait is not bounded by it. Past it the bridge tries again."""


class MattermostConfig(ConfigSection, frozen=True, kw_only=True):
    """The whole of mattermost.toml, mattermostd's config."""

    server: MattermostServer
    owner: MattermostOwner
    paths: PathsSection = msgspec.field(default_factory=PathsSection)
    listen: MattermostListen = msgspec.field(default_factory=MattermostListen)
    reply: MattermostReply = msgspec.field(default_factory=MattermostReply)
    sockets: MattermostSockets = msgspec.field(default_factory=MattermostSockets)
