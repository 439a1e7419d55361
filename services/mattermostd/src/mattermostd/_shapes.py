"""What Mattermost's REST API v4 sends the bridge, and how its requests fail.

The shapes are Mattermost's (`api/v4/source/posts.yaml`, `users.yaml`, `channels.yaml`,
`reactions.yaml` in mattermost/mattermost); fields the bridge does not read are ignored.
`_api` says which status is which failure.
"""

from __future__ import annotations

from typing import Any

import msgspec

import proto

__all__ = [
    "ApiError",
    "Channel",
    "NotAllowed",
    "Post",
    "PostList",
    "Reaction",
    "Rejected",
    "ServerTrouble",
    "TokenRefused",
    "User",
]


class User(msgspec.Struct, frozen=True, kw_only=True):
    """A user (`users.yaml`: User); the bridge needs the id and the name."""

    id: str
    username: str = ""
    is_bot: bool = False


class Channel(msgspec.Struct, frozen=True, kw_only=True):
    """A channel (`channels.yaml`: Channel)."""

    id: str
    type: str = ""
    name: str = ""


class Post(msgspec.Struct, frozen=True, kw_only=True):
    """A post (`posts.yaml`: Post).

    `original_id` is set on the soft-deleted copy an edit leaves behind; `delete_at` is
    non-zero on a deleted post; a reply or a reaction moves `update_at`.
    """

    id: str
    create_at: int = 0
    update_at: int = 0
    delete_at: int = 0
    user_id: str = ""
    channel_id: str = ""
    root_id: str = ""
    original_id: str = ""
    message: str = ""
    type: str = ""
    props: dict[str, Any] = msgspec.field(default_factory=dict)
    pending_post_id: str = ""


class PostList(msgspec.Struct, frozen=True, kw_only=True):
    """A list of posts (`posts.yaml`: PostList): ids in `order`, newest first."""

    order: list[str] = msgspec.field(default_factory=list)
    posts: dict[str, Post] = msgspec.field(default_factory=dict)

    def oldest_first(self) -> list[Post]:
        """Every post of the list, oldest first (by `create_at`, then id)."""
        return sorted(self.posts.values(), key=lambda post: (post.create_at, post.id))


class Reaction(msgspec.Struct, frozen=True, kw_only=True):
    """A reaction (`reactions.yaml`: Reaction)."""

    user_id: str
    post_id: str
    emoji_name: str
    create_at: int = 0


class ApiError(Exception):
    """Mattermost did not do what was asked."""


class TokenRefused(ApiError, proto.NeedsOwner):
    """401: the server does not accept the bot's token."""


class NotAllowed(ApiError, proto.NeedsOwner):
    """403: the bot may not do this."""


class ServerTrouble(ApiError):
    """The server is down, unreachable, slow, or failing (5xx): try again later."""


class Rejected(ApiError):
    """Any other 4xx: the server refused this request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
