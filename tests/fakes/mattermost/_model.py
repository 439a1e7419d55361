"""The fake's records and the JSON the real server renders them as.

Field names, order and emptiness follow the Go structs: `server/public/model/post.go` (Post,
PostPatch, PostList), `model/user.go` (User, Sanitize, SetDefaultNotifications),
`model/channel.go` (Channel), `model/reaction.go` (Reaction) and `model/utils.go` (AppError,
NewId). A deleted post is rendered with an empty message and empty metadata, as
`app/post_metadata.go` PreparePostForClient does.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

_ID_ALPHABET = "ybndrfg8ejkmcpqxot1uwisza345h769"  # model/utils.go encoding

MESSAGE_MAX_RUNES = 16383  # model.PostMessageMaxRunesV2 = 65535 / 4
EMOJI_NAME_MAX_LENGTH = 64  # model.EmojiNameMaxLength
SERVER_VERSION = "10.5.0"


def new_id() -> str:
    """model.NewId: 26 characters of a random 128-bit value in Mattermost's base32."""
    n = int.from_bytes(secrets.token_bytes(16), "big")
    chars = []
    for _ in range(26):
        chars.append(_ID_ALPHABET[n & 31])
        n >>= 5
    return "".join(chars)


def is_valid_id(value: object) -> bool:
    """model.IsValidId: 26 lower-case letters and digits."""
    return isinstance(value, str) and len(value) == 26 and value.isalnum() and value.islower()


class Clock:
    """Milliseconds since the epoch, never the same value twice (update_at must move)."""

    def __init__(self) -> None:
        self._last = 0

    def now_ms(self) -> int:
        """model.GetMillis, made strictly increasing."""
        self._last = max(self._last + 1, int(time.time() * 1000))
        return self._last


@dataclass
class User:
    """A user; bots are users with `is_bot`."""

    id: str
    username: str
    create_at: int
    is_bot: bool = False
    first_name: str = ""
    last_name: str = ""
    nickname: str = ""
    roles: str = "system_user"
    mention_keys: str = ""

    def to_json(self, *, me: bool) -> dict[str, Any]:
        """The user as /users/me (`me`) or as another user sees it (Sanitize, no notify_props)."""
        out: dict[str, Any] = {
            "id": self.id,
            "create_at": self.create_at,
            "update_at": self.create_at,
            "delete_at": 0,
            "username": self.username,
            "auth_data": "",
            "auth_service": "",
            "email": f"{self.username}@example.invalid",
            "nickname": self.nickname,
            "first_name": self.first_name,
            "last_name": self.last_name,
            "position": "",
            "roles": self.roles,
        }
        if me:
            out["notify_props"] = {
                "channel": "true",
                "comments": "never",
                "desktop": "mention",
                "desktop_sound": "true",
                "desktop_threads": "all",
                "email": "true",
                "email_threads": "all",
                "first_name": "false",
                "mention_keys": self.mention_keys,
                "push": "mention",
                "push_status": "away",
                "push_threads": "all",
            }
            out["last_password_update"] = self.create_at
        out["locale"] = "en"
        # timezones.DefaultUserTimezone: a StringMap, so the flag is the string "true".
        out["timezone"] = {
            "automaticTimezone": "",
            "manualTimezone": "",
            "useAutomaticTimezone": "true",
        }
        if self.is_bot:
            out["is_bot"] = True
            out["bot_description"] = f"{self.username} bot"
        out["disable_welcome_email"] = False
        return out


@dataclass
class Channel:
    """A channel: `D` for a direct message, `O` open, `P` private."""

    id: str
    type: str
    name: str
    display_name: str
    team_id: str
    create_at: int
    creator_id: str
    members: set[str] = field(default_factory=set)
    last_post_at: int = 0
    last_root_post_at: int = 0
    total_msg_count: int = 0
    total_msg_count_root: int = 0

    def to_json(self) -> dict[str, Any]:
        """model.Channel as the API renders it."""
        return {
            "id": self.id,
            "create_at": self.create_at,
            "update_at": self.create_at,
            "delete_at": 0,
            "team_id": self.team_id,
            "type": self.type,
            "display_name": self.display_name,
            "name": self.name,
            "header": "",
            "purpose": "",
            "last_post_at": self.last_post_at,
            "total_msg_count": self.total_msg_count,
            "extra_update_at": 0,
            "creator_id": self.creator_id,
            "scheme_id": None,
            "props": None,
            "group_constrained": None,
            "shared": None,
            "total_msg_count_root": self.total_msg_count_root,
            "policy_id": None,
            "last_root_post_at": self.last_root_post_at,
        }


@dataclass
class Reaction:
    """A reaction of a user to a post."""

    user_id: str
    post_id: str
    emoji_name: str
    create_at: int
    channel_id: str

    def to_json(self) -> dict[str, Any]:
        """model.Reaction as the API renders it."""
        return {
            "user_id": self.user_id,
            "post_id": self.post_id,
            "emoji_name": self.emoji_name,
            "create_at": self.create_at,
            "update_at": self.create_at,
            "delete_at": 0,
            "remote_id": "",
            "channel_id": self.channel_id,
        }


@dataclass
class Post:
    """A post as stored: edits leave soft-deleted copies with `original_id` set."""

    id: str
    create_at: int
    update_at: int
    user_id: str
    channel_id: str
    message: str
    root_id: str = ""
    original_id: str = ""
    edit_at: int = 0
    delete_at: int = 0
    is_pinned: bool = False
    type: str = ""
    props: dict[str, Any] = field(default_factory=dict)
    file_ids: list[str] = field(default_factory=list)
    has_reactions: bool = False

    def to_json(
        self, *, reactions: list[Reaction] | None = None, pending_post_id: str = ""
    ) -> dict[str, Any]:
        """The post as PreparePostForClient leaves it (deleted: no message, no metadata)."""
        deleted = self.delete_at > 0
        out: dict[str, Any] = {
            "id": self.id,
            "create_at": self.create_at,
            "update_at": self.update_at,
            "edit_at": self.edit_at,
            "delete_at": self.delete_at,
            "is_pinned": self.is_pinned,
            "user_id": self.user_id,
            "channel_id": self.channel_id,
            "root_id": self.root_id,
            "original_id": self.original_id,
            "message": "" if deleted else self.message,
            "type": self.type,
            "props": dict(self.props),
            "hashtags": "",
            "file_ids": list(self.file_ids),
            "pending_post_id": pending_post_id,
        }
        if self.has_reactions:
            out["has_reactions"] = True
        out["reply_count"] = 0
        out["last_reply_at"] = 0
        out["participants"] = None
        metadata: dict[str, Any] = {}
        if reactions and not deleted:
            metadata["reactions"] = [r.to_json() for r in reactions]
        out["metadata"] = metadata
        return out


class ApiError(Exception):
    """A model.AppError on its way to the client."""

    def __init__(self, status: int, error_id: str, message: str, detail: str = "") -> None:
        super().__init__(f"{status} {error_id}")
        self.status = status
        self.error_id = error_id
        self.message = message
        self.detail = detail

    def to_json(self, request_id: str) -> dict[str, Any]:
        """The AppError JSON; DetailedError is wiped as a non-developer server does."""
        return {
            "id": self.error_id,
            "message": self.message,
            "detailed_error": "",
            "request_id": request_id,
            "status_code": self.status,
        }


def permission_error(permission: str) -> ApiError:
    """c.SetPermissionError (web/context.go)."""
    return ApiError(
        403,
        "api.context.permissions.app_error",
        "You do not have the appropriate permissions.",
        f"userId=..., permission={permission}",
    )


def invalid_param(name: str) -> ApiError:
    """c.SetInvalidParam (web/context.go): a bad or missing value in the body or query."""
    return ApiError(
        400,
        "api.context.invalid_body_param.app_error",
        f"Invalid or missing {name} in request body.",
    )


def invalid_url_param(name: str) -> ApiError:
    """c.SetInvalidURLParam (web/context.go): a bad id in the path."""
    return ApiError(
        400,
        "api.context.invalid_url_param.app_error",
        f"Invalid or missing {name} parameter in request URL.",
    )


SESSION_EXPIRED = ApiError(
    401, "api.context.session_expired.app_error", "Invalid or expired session, please login again."
)
