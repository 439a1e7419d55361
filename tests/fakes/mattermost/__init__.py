"""A fake Mattermost server for tests: API v4 over real HTTP and a real WebSocket on loopback.

It serves the subset of Mattermost's API v4 a bridge needs, with the request and event shapes
of Mattermost's own definitions and handlers (cited in each module), and enforces what the real
server enforces where a client could get it wrong: the bearer token, rate limits (429 with the
server's headers), `root_id` on replies, the message size limit, `pending_post_id`
deduplication. `find_mentions` applies Mattermost's mention rules to a message.

    async with serve_fake_mattermost() as mm:
        owner = mm.create_user("owner")
        bot = mm.create_user("boxmaker", bot=True)
        dm = mm.direct_channel(owner, bot)
        mm.post(owner, dm, "hello")
"""

from ._mentions import Mentions, find_mentions
from ._model import ApiError, Post
from ._routes import Recorded
from ._server import FakeMattermost, FakeUser, serve_fake_mattermost

__all__ = [
    "ApiError",
    "FakeMattermost",
    "FakeUser",
    "Mentions",
    "Post",
    "Recorded",
    "find_mentions",
    "serve_fake_mattermost",
]
