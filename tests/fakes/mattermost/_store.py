"""The fake's state and the server's rules for posts, channels and reactions.

Each rule names where it comes from:
- creating a post: `server/channels/api4/post.go` createPost and `app/post.go` CreatePostAsUser,
  CreatePost, deduplicateCreatePost (a `pending_post_id` seen in the last 30 s returns the post
  it made, fetched again, so its `pending_post_id` is empty; a failed create forgets the id);
  the root checks (unknown root or a root that is itself a reply: 400
  `api.post.create_post.root_id.app_error`; a root in another channel:
  `channel_root_id`, made 400 by CreatePostAsUser); `model/post.go` IsValid (16383 runes);
  a bot's post gets `props.from_bot = "true"`;
- a reply sets its root's `update_at` to its `create_at` (`store/sqlstore/post_store.go`
  SaveMultiple); an edit sets `edit_at` and `update_at`, bumps the root of a reply, and inserts
  the old version as a new post with `delete_at = update_at` and `original_id` = the post's id
  (post_store.go Update); patching another user's post needs `edit_others_posts` (api4/post.go
  postPatchChecks), which no user of the fake has;
- `?since=` returns every post of the channel with `update_at > since`, deleted ones and edit
  copies included, plus the roots of those (in `posts`, not in `order`), newest first
  (post_store.go GetPostsSince; api4 getPostsForChannel);
- a reaction sets the post's `has_reactions` and `update_at` (`store/sqlstore/reaction_store.go`
  updatePostForReactionsOnInsert; `app/reaction.go` SaveReactionForPost; `api4/reaction.go`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ._mentions import find_mentions
from ._model import (
    EMOJI_NAME_MAX_LENGTH,
    MESSAGE_MAX_RUNES,
    ApiError,
    Channel,
    Clock,
    Post,
    Reaction,
    User,
    invalid_param,
    is_valid_id,
    new_id,
    permission_error,
)

PENDING_POST_TTL_S = 30.0  # app/post.go pendingPostIDsCacheTTL
SINCE_LIMIT = 1000  # post_store.go GetPostsSince
PER_PAGE_DEFAULT = 60
PER_PAGE_MAXIMUM = 200  # web/params.go PerPageMaximum


TOO_LONG = "Message property is longer than the maximum permitted length."


def json_string(value: Any) -> str:
    """What `post.ToJSON()` or `json.Marshal` put in an event's data: JSON inside a string."""
    return msgspec.json.encode(value).decode()


@dataclass
class WsEvent:
    """A model.WebSocketEvent before a connection gives it a sequence number."""

    event: str
    data: dict[str, Any]
    channel_id: str = ""
    user_id: str = ""
    team_id: str = ""
    omit_users: dict[str, bool] | None = None
    mentioned: frozenset[str] = frozenset()
    """Users whose copy of a `posted` event gets `data.mentions` (the server's mentions hook)."""


@dataclass
class Store:
    """Users, tokens, channels, posts and reactions, and the rules that change them."""

    publish: Callable[[WsEvent], None]
    clock: Clock = field(default_factory=Clock)
    team_id: str = field(default_factory=new_id)
    users: dict[str, User] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    channels: dict[str, Channel] = field(default_factory=dict)
    posts: dict[str, Post] = field(default_factory=dict)
    reactions: dict[str, list[Reaction]] = field(default_factory=dict)
    pending_seen: dict[str, tuple[str, float]] = field(default_factory=dict)
    create_requests: Counter[str] = field(default_factory=Counter)
    created: dict[str, list[str]] = field(default_factory=dict)
    pending_ttl_s: float = PENDING_POST_TTL_S

    # users and channels

    def add_user(self, username: str, *, bot: bool, admin: bool = False) -> User:
        """A new user (or bot); `admin` gives it the system admin role (`manage_system`)."""
        if any(u.username == username for u in self.users.values()):
            raise ValueError(f"username taken: {username!r}")
        user = User(
            id=new_id(),
            username=username,
            create_at=self.clock.now_ms(),
            is_bot=bot,
            roles="system_admin system_user" if admin else "system_user",
        )
        self.users[user.id] = user
        return user

    def issue_token(self, user_id: str) -> str:
        """A personal access (or bot) token for the user."""
        token = new_id()
        self.tokens[token] = user_id
        return token

    def user(self, user_id: str) -> User:
        """The user, or the server's 404."""
        if user_id not in self.users:
            raise ApiError(404, "app.user.missing_account.const", "Unable to find the user.")
        return self.users[user_id]

    def direct_channel(self, creator_id: str, other_id: str) -> Channel:
        """GetOrCreateDirectChannel: the one DM channel of two users, named `id1__id2`."""
        a, b = sorted((creator_id, other_id))
        name = f"{a}__{b}"
        for channel in self.channels.values():
            if channel.name == name and channel.type == "D":
                return channel
        channel = Channel(
            id=new_id(),
            type="D",
            name=name,
            display_name="",
            team_id="",
            create_at=self.clock.now_ms(),
            creator_id=creator_id,
            members={a, b},
        )
        self.channels[channel.id] = channel
        return channel

    def add_channel(self, name: str, member_ids: set[str], *, private: bool) -> Channel:
        """An open (or private) team channel with these members."""
        channel = Channel(
            id=new_id(),
            type="P" if private else "O",
            name=name,
            display_name=name,
            team_id=self.team_id,
            create_at=self.clock.now_ms(),
            creator_id="",
            members=set(member_ids),
        )
        self.channels[channel.id] = channel
        return channel

    def readable(self, user_id: str, channel_id: str) -> Channel:
        """The channel if the user may read it (read_channel), else the server's 403."""
        channel = self.channels.get(channel_id)
        if channel is None or (user_id not in channel.members and channel.type != "O"):
            raise permission_error("read_channel")
        return channel

    def _postable(self, user_id: str, channel_id: str) -> Channel:
        channel = self.channels.get(channel_id)
        if channel is None or user_id not in channel.members:
            raise permission_error("create_post")
        return channel

    # posts

    def _live_post(self, user_id: str, post_id: str) -> Post:
        post = self.posts.get(post_id)
        if post is None or post.delete_at:
            raise ApiError(404, "app.post.get.app_error", "Unable to get the post.")
        self.readable(user_id, post.channel_id)
        return post

    def render(self, post: Post, pending_post_id: str = "") -> dict[str, Any]:
        """The post as a client receives it."""
        return post.to_json(reactions=self.reactions.get(post.id), pending_post_id=pending_post_id)

    def create_post(
        self, user_id: str, body: dict[str, Any], *, set_online: bool
    ) -> dict[str, Any]:
        """POST /api/v4/posts as `user_id`; the post as the response carries it."""
        channel_id = body.get("channel_id")
        message = body.get("message", "")
        root_id = body.get("root_id") or ""
        pending = body.get("pending_post_id") or ""
        props = body.get("props") or {}
        if not isinstance(channel_id, str) or not isinstance(message, str):
            raise invalid_param("post")
        if (
            not isinstance(root_id, str)
            or not isinstance(pending, str)
            or not isinstance(props, dict)
        ):
            raise invalid_param("post")
        channel = self._postable(user_id, channel_id)
        post_type = body.get("type") or ""
        if isinstance(post_type, str) and post_type.startswith("system_"):
            raise ApiError(
                400, "api.context.invalid_param.app_error", "Invalid post.type parameter."
            )
        if pending:
            self.create_requests[pending] += 1
            seen = self.pending_seen.get(pending)
            if seen is not None and seen[1] > time.monotonic():
                return self.render(self._live_post(user_id, seen[0]))
            self.pending_seen[pending] = ("", time.monotonic() + self.pending_ttl_s)
        # CreatePost keeps a given create_at only for a session with manage_system
        # (api4/post.go: "if post.CreateAt != 0 && !HasPermissionTo(...ManageSystem)").
        create_at = body.get("create_at")
        if not (
            isinstance(create_at, int)
            and create_at > 0
            and "system_admin" in self.users[user_id].roles.split()
        ):
            create_at = None
        try:
            post = self._save_post(
                user_id, channel, message, root_id, dict(props), create_at=create_at
            )
        except ApiError:
            self.pending_seen.pop(pending, None)
            raise
        if pending:
            self.pending_seen[pending] = (post.id, time.monotonic() + self.pending_ttl_s)
            self.created.setdefault(pending, []).append(post.id)
        rendered = self.render(post, pending_post_id=pending)
        self._publish_posted(post, channel, rendered, set_online=set_online)
        return rendered

    def _save_post(
        self,
        user_id: str,
        channel: Channel,
        message: str,
        root_id: str,
        props: dict[str, Any],
        *,
        create_at: int | None = None,
    ) -> Post:
        root: Post | None = None
        if root_id:
            root = self.posts.get(root_id)
            if root is None or root.delete_at or root.root_id:
                raise ApiError(
                    400, "api.post.create_post.root_id.app_error", "Invalid RootId parameter."
                )
            if root.channel_id != channel.id:
                raise ApiError(
                    400,
                    "api.post.create_post.channel_root_id.app_error",
                    "Invalid ChannelId for RootId parameter.",
                )
        if self.users[user_id].is_bot:
            props["from_bot"] = "true"
        if len(message) > MESSAGE_MAX_RUNES:
            raise ApiError(
                400,
                "model.post.is_valid.message_length.app_error",
                TOO_LONG,
            )
        now = create_at or self.clock.now_ms()  # Post.PreSave: update_at = create_at
        post = Post(
            id=new_id(),
            create_at=now,
            update_at=now,
            user_id=user_id,
            channel_id=channel.id,
            message=message,
            root_id=root_id,
            props=props,
        )
        self.posts[post.id] = post
        if root is not None:
            root.update_at = max(root.update_at, post.create_at)
        channel.last_post_at = max(channel.last_post_at, now)
        channel.total_msg_count += 1
        if not root_id:
            channel.last_root_post_at = max(channel.last_root_post_at, now)
            channel.total_msg_count_root += 1
        return post

    def mentioned(self, post: Post, channel: Channel) -> frozenset[str]:
        """Who the server tells they were mentioned: the other user of a DM, else by keyword."""
        if channel.type == "D":
            return frozenset(channel.members - {post.user_id})
        members = {u: self.users[u] for u in channel.members}
        found = find_mentions(
            post.message, [u.username for u in members.values()], props=post.props
        )
        everyone = found.here or found.channel or found.all
        return frozenset(
            uid
            for uid, u in members.items()
            if uid != post.user_id and (everyone or u.username.lower() in found.users)
        )

    def _publish_posted(
        self, post: Post, channel: Channel, rendered: dict[str, Any], *, set_online: bool
    ) -> None:
        """app/notification.go SendNotifications: the `posted` event (post as a JSON string)."""
        sender = self.users[post.user_id]
        data = {
            "channel_display_name": f"@{sender.username}"
            if channel.type == "D"
            else channel.display_name,
            "channel_name": channel.name,
            "channel_type": channel.type,
            "post": json_string(rendered),
            "sender_name": f"@{sender.username}",
            "set_online": set_online,
            "team_id": channel.team_id,
        }
        self.publish(
            WsEvent("posted", data, channel_id=channel.id, mentioned=self.mentioned(post, channel))
        )

    def get_post(self, user_id: str, post_id: str) -> dict[str, Any]:
        """GET /api/v4/posts/{post_id}."""
        return self.render(self._live_post(user_id, post_id))

    def patch_post(self, user_id: str, post_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """PUT /api/v4/posts/{post_id}/patch: leaves the old version behind as a deleted copy."""
        post = self.posts.get(post_id)
        if post is None or post.delete_at:
            raise permission_error("edit_post")
        self.readable(user_id, post.channel_id)
        if post.user_id != user_id:
            raise permission_error("edit_others_posts")
        message = patch.get("message")
        if message is not None and not isinstance(message, str):
            raise invalid_param("post")
        now = self.clock.now_ms()
        old = Post(**{**post.__dict__, "props": dict(post.props), "file_ids": list(post.file_ids)})
        if message is not None and len(message) > MESSAGE_MAX_RUNES:
            raise ApiError(
                400,
                "model.post.is_valid.message_length.app_error",
                TOO_LONG,
            )
        if message is not None and message != post.message:
            post.message = message
            post.edit_at = now
        if isinstance(patch.get("props"), dict):
            post.props = dict(patch["props"])
        if isinstance(patch.get("is_pinned"), bool):
            post.is_pinned = patch["is_pinned"]
        post.update_at = now
        old.id, old.original_id, old.delete_at, old.update_at = new_id(), post.id, now, now
        self.posts[old.id] = old
        if post.root_id and post.root_id in self.posts:
            root = self.posts[post.root_id]
            root.update_at = max(root.update_at, now)
        rendered = self.render(post)
        self.publish(
            WsEvent("post_edited", {"post": json_string(rendered)}, channel_id=post.channel_id)
        )
        return rendered

    def delete_post(self, user_id: str, post_id: str) -> None:
        """DELETE /api/v4/posts/{post_id}: soft-deletes the post and, for a root, its replies."""
        post = self._live_post(user_id, post_id)
        if post.user_id != user_id:
            raise permission_error("delete_others_posts")
        before = self.render(post)
        now = self.clock.now_ms()
        for p in self.posts.values():
            if (p.id == post.id or p.root_id == post.id) and not p.delete_at:
                p.delete_at = p.update_at = now
        self.publish(
            WsEvent(
                "post_deleted",
                {"delete_by": user_id, "post": json_string(before)},
                channel_id=post.channel_id,
            )
        )

    def _post_list(self, order: list[Post], extra: list[Post]) -> dict[str, Any]:
        posts = {p.id: self.render(p) for p in [*extra, *order]}
        return {
            "order": [p.id for p in order],
            "posts": posts,
            "next_post_id": "",
            "prev_post_id": "",
            "has_next": False,
            "first_inaccessible_post_time": 0,
        }

    def posts_since(self, user_id: str, channel_id: str, since: int) -> dict[str, Any]:
        """GET /api/v4/channels/{id}/posts?since=: every change, deletions and edit copies too."""
        self.readable(user_id, channel_id)
        changed = [
            p for p in self.posts.values() if p.channel_id == channel_id and p.update_at > since
        ]
        changed = sorted(changed, key=lambda p: p.create_at)[:SINCE_LIMIT]
        roots = [self.posts[p.root_id] for p in changed if p.root_id in self.posts]
        changed.sort(key=lambda p: p.create_at, reverse=True)
        return self._post_list(changed, roots)

    def posts_page(self, user_id: str, channel_id: str, page: int, per_page: int) -> dict[str, Any]:
        """GET /api/v4/channels/{id}/posts?page=&per_page=: live posts, newest first."""
        self.readable(user_id, channel_id)
        live = sorted(
            (p for p in self.posts.values() if p.channel_id == channel_id and not p.delete_at),
            key=lambda p: p.create_at,
            reverse=True,
        )
        chunk = live[page * per_page : (page + 1) * per_page]
        roots = {p.root_id or p.id for p in chunk}
        threads = [p for p in live if p.id in roots or p.root_id in roots]
        out = self._post_list(chunk, threads)
        start, end = page * per_page, (page + 1) * per_page
        out["prev_post_id"] = live[end].id if end < len(live) and chunk else ""
        out["next_post_id"] = live[start - 1].id if 0 < start <= len(live) and chunk else ""
        return out

    def thread(self, user_id: str, post_id: str) -> dict[str, Any]:
        """GET /api/v4/posts/{post_id}/thread: the post first, then the rest of its thread."""
        post = self._live_post(user_id, post_id)
        root_id = post.root_id or post.id
        rest = sorted(
            (
                p
                for p in self.posts.values()
                if (p.id == root_id or p.root_id == root_id) and not p.delete_at and p.id != post.id
            ),
            key=lambda p: p.create_at,
            reverse=True,
        )
        return self._post_list([post, *rest], [])

    # reactions and typing

    def save_reaction(self, user_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST /api/v4/reactions (200, not 201, as api4/reaction.go saveReaction writes it)."""
        emoji = body.get("emoji_name")
        if (
            not is_valid_id(body.get("user_id"))
            or not is_valid_id(body.get("post_id"))
            or not isinstance(emoji, str)
            or not emoji
            or len(emoji) > EMOJI_NAME_MAX_LENGTH
        ):
            raise ApiError(
                400, "api.reaction.save_reaction.invalid.app_error", "Reaction is not valid."
            )
        if body["user_id"] != user_id:
            raise ApiError(
                403,
                "api.reaction.save_reaction.user_id.app_error",
                "You cannot save reaction for the other user.",
            )
        post = self.posts.get(body["post_id"])
        if post is None:
            raise permission_error("add_reaction")
        self._postable(user_id, post.channel_id)
        post = self._live_post(user_id, post.id)
        now = self.clock.now_ms()
        mine = self.reactions.setdefault(post.id, [])
        reaction = next((r for r in mine if r.user_id == user_id and r.emoji_name == emoji), None)
        if reaction is None:
            reaction = Reaction(user_id, post.id, emoji, now, post.channel_id)
            mine.append(reaction)
        post.has_reactions = True
        post.update_at = now
        self.publish(
            WsEvent(
                "reaction_added",
                {"reaction": json_string(reaction.to_json())},
                channel_id=post.channel_id,
            )
        )
        return reaction.to_json()

    def reactions_for(self, user_id: str, post_id: str) -> list[dict[str, Any]]:
        """GET /api/v4/posts/{post_id}/reactions."""
        post = self.posts.get(post_id)
        if post is None:
            raise permission_error("read_channel")
        self.readable(user_id, post.channel_id)
        return [r.to_json() for r in self.reactions.get(post_id, [])]

    def typing(self, user_id: str, channel_id: str, parent_id: str) -> None:
        """app/user.go PublishUserTyping: `typing` to the channel, not to the typist."""
        self._postable(user_id, channel_id)
        self.publish(
            WsEvent(
                "typing",
                {"parent_id": parent_id, "user_id": user_id},
                channel_id=channel_id,
                omit_users={user_id: True},
            )
        )

    def check_typing_body(self, body: Any) -> tuple[str, str]:
        """model.TypingRequest: channel_id and parent_id."""
        if not isinstance(body, dict) or not isinstance(body.get("channel_id"), str):
            raise invalid_param("typing_request")
        parent = body.get("parent_id") or ""
        return body["channel_id"], parent if isinstance(parent, str) else ""
