"""The fake's JSON against Mattermost's API definitions.

The schemas are ours, written from mattermost/mattermost `api/v4/source/definitions.yaml`
(components.schemas User, UserNotifyProps, Timezone, Channel, Post, PostMetadata, PostList,
Reaction, AppError, StatusOK) and, for the WebSocket, `server/public/model/websocket_message.go`
(webSocketEventJSON, WebsocketBroadcast, WebSocketResponse). The yaml marks nothing required;
`required` here lists what the Go structs always marshal (no `omitempty`: model/user.go,
model/post.go, model/channel.go, model/reaction.go, model/utils.go AppError).
"""

from __future__ import annotations

from typing import Any

import msgspec
import trio
from fakes.world import CAP_S, World, next_event
from jsonschema import Draft202012Validator

STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}

USER_NOTIFY_PROPS = {
    "type": "object",
    "properties": {
        k: STR
        for k in (
            "email",
            "push",
            "desktop",
            "desktop_sound",
            "mention_keys",
            "channel",
            "first_name",
        )
    },
}
TIMEZONE = {
    "type": "object",
    "properties": {
        # The yaml says boolean; model/user.go's Timezone is a StringMap (timezones
        # DefaultUserTimezone), so the server sends the string "true". We follow the server.
        "useAutomaticTimezone": {"type": ["boolean", "string"]},
        "manualTimezone": STR,
        "automaticTimezone": STR,
    },
}
USER = {
    "type": "object",
    "properties": {
        "id": STR,
        "create_at": INT,
        "update_at": INT,
        "delete_at": INT,
        "username": STR,
        "first_name": STR,
        "last_name": STR,
        "nickname": STR,
        "email": STR,
        "email_verified": BOOL,
        "auth_service": STR,
        "roles": STR,
        "locale": STR,
        "notify_props": USER_NOTIFY_PROPS,
        "props": {"type": "object"},
        "last_password_update": INT,
        "last_picture_update": INT,
        "failed_attempts": INT,
        "mfa_active": BOOL,
        "timezone": TIMEZONE,
        "terms_of_service_id": STR,
        "terms_of_service_create_at": INT,
    },
    "required": ["id", "delete_at", "username", "auth_service", "email", "roles", "locale"],
}
CHANNEL = {
    "type": "object",
    "properties": {
        "id": STR,
        "create_at": INT,
        "update_at": INT,
        "delete_at": INT,
        "team_id": STR,
        "type": STR,
        "display_name": STR,
        "name": STR,
        "header": STR,
        "purpose": STR,
        "last_post_at": INT,
        "total_msg_count": INT,
        "extra_update_at": INT,
        "creator_id": STR,
    },
    "required": ["id", "create_at", "update_at", "delete_at", "team_id", "type", "name"],
}
REACTION = {
    "type": "object",
    "properties": {"user_id": STR, "post_id": STR, "emoji_name": STR, "create_at": INT},
    "required": ["user_id", "post_id", "emoji_name", "create_at"],
}
POST_METADATA = {
    "type": "object",
    "properties": {
        "embeds": {"type": "array"},
        "emojis": {"type": "array"},
        "files": {"type": "array"},
        "images": {"type": "object"},
        "reactions": {"type": "array", "items": REACTION},
    },
}
POST = {
    "type": "object",
    "properties": {
        "id": STR,
        "create_at": INT,
        "update_at": INT,
        "delete_at": INT,
        "edit_at": INT,
        "user_id": STR,
        "channel_id": STR,
        "root_id": STR,
        "original_id": STR,
        "message": STR,
        "type": STR,
        "props": {"type": "object"},
        "hashtag": STR,
        "file_ids": {"type": "array", "items": STR},
        "pending_post_id": STR,
        "metadata": POST_METADATA,
    },
    "required": [
        "id",
        "create_at",
        "update_at",
        "edit_at",
        "delete_at",
        "user_id",
        "channel_id",
        "root_id",
        "original_id",
        "message",
        "type",
        "props",
        "pending_post_id",
    ],
}
POST_LIST = {
    "type": "object",
    "properties": {
        "order": {"type": "array", "items": STR},
        "posts": {"type": "object", "additionalProperties": POST},
        "next_post_id": STR,
        "prev_post_id": STR,
        "has_next": BOOL,
    },
    "required": ["order", "posts", "next_post_id", "prev_post_id"],
}
APP_ERROR = {
    "type": "object",
    # detailed_error is not in the yaml; model.AppError always marshals it
    "properties": {"status_code": INT, "id": STR, "message": STR, "request_id": STR},
    "required": ["id", "message", "detailed_error", "request_id", "status_code"],
}
STATUS_OK = {"type": "object", "properties": {"status": {"const": "OK"}}, "required": ["status"]}
BROADCAST = {
    "type": "object",
    "properties": {
        "omit_users": {"type": ["object", "null"], "additionalProperties": BOOL},
        "user_id": STR,
        "channel_id": STR,
        "team_id": STR,
        "connection_id": STR,
        "omit_connection_id": STR,
    },
    "required": ["omit_users", "user_id", "channel_id", "team_id"],
    # broadcast_hooks and their args are never sent to a client (websocket_message.go)
    "not": {"anyOf": [{"required": ["broadcast_hooks"]}, {"required": ["broadcast_hook_args"]}]},
}
EVENT = {
    "type": "object",
    "properties": {
        "event": STR,
        "data": {"type": "object"},
        "broadcast": BROADCAST,
        "seq": INT,
    },
    "required": ["event", "data", "broadcast", "seq"],
    "additionalProperties": False,
}
RESPONSE = {
    "type": "object",
    "properties": {
        "status": {"enum": ["OK", "FAIL"]},
        "seq_reply": INT,
        "data": {"type": "object"},
        "error": APP_ERROR,
    },
    "required": ["status"],
    "additionalProperties": False,
}
POSTED_DATA = {
    "type": "object",
    "properties": {
        "channel_display_name": STR,
        "channel_name": STR,
        "channel_type": STR,
        "post": STR,
        "sender_name": STR,
        "set_online": BOOL,
        "team_id": STR,
        "mentions": STR,
    },
    "required": ["channel_display_name", "channel_name", "channel_type", "post", "sender_name"],
}


def check(instance: Any, schema: dict[str, Any]) -> None:
    Draft202012Validator(schema).validate(instance)


async def test_rest_json_matches_the_definitions(world: World) -> None:
    with trio.fail_after(CAP_S):
        async with world.client(world.owner) as c:
            check((await c.get("/api/v4/users/me")).json(), USER)
            check((await c.get(f"/api/v4/users/{world.bot.id}")).json(), USER)
            check((await c.get("/api/v4/users/username/stranger")).json(), USER)
            direct = await c.post("/api/v4/channels/direct", json=[world.owner.id, world.bot.id])
            assert direct.status_code == 201
            check(direct.json(), CHANNEL)
            check((await c.get(f"/api/v4/channels/{world.dm}")).json(), CHANNEL)
            created = await c.post(
                "/api/v4/posts",
                json={"channel_id": world.dm, "message": "root", "pending_post_id": "p1"},
            )
            assert created.status_code == 201
            root = created.json()
            check(root, POST)
            reply = await c.post(
                "/api/v4/posts",
                json={"channel_id": world.dm, "message": "r", "root_id": root["id"]},
            )
            check(reply.json(), POST)
            patched = await c.put(f"/api/v4/posts/{root['id']}/patch", json={"message": "edited"})
            check(patched.json(), POST)
            reaction = await c.post(
                "/api/v4/reactions",
                json={"user_id": world.owner.id, "post_id": root["id"], "emoji_name": "eyes"},
            )
            check(reaction.json(), REACTION)
            check((await c.get(f"/api/v4/posts/{root['id']}")).json(), POST)
            for r in (await c.get(f"/api/v4/posts/{root['id']}/reactions")).json():
                check(r, REACTION)
            check((await c.get(f"/api/v4/posts/{root['id']}/thread")).json(), POST_LIST)
            check((await c.get(f"/api/v4/channels/{world.dm}/posts")).json(), POST_LIST)
            since = await c.get(f"/api/v4/channels/{world.dm}/posts", params={"since": 1})
            check(since.json(), POST_LIST)
            typing = await c.post(
                f"/api/v4/users/{world.owner.id}/typing", json={"channel_id": world.dm}
            )
            check(typing.json(), STATUS_OK)
            check((await c.delete(f"/api/v4/posts/{reply.json()['id']}")).json(), STATUS_OK)
            for bad in (
                await c.get("/api/v4/users/me", headers={"Authorization": "Bearer wrong"}),
                await c.get(f"/api/v4/posts/{'x' * 26}"),
                await c.post(
                    "/api/v4/posts", json={"channel_id": world.dm, "message": "x" * 16384}
                ),
                await c.put(f"/api/v4/posts/{root['id']}/patch", content=b"{"),
            ):
                assert bad.status_code >= 400
                check(bad.json(), APP_ERROR)


async def test_websocket_frames_match_the_event_model(world: World) -> None:
    with trio.fail_after(CAP_S):
        async with world.ws() as ws:
            await ws.send_message(msgspec.json.encode({"seq": 1, "action": "user_typing"}).decode())
            check(await next_event(ws), RESPONSE)
            challenge = {
                "seq": 2,
                "action": "authentication_challenge",
                "data": {"token": world.bot.token},
            }
            await ws.send_message(msgspec.json.encode(challenge).decode())
            frames = [await next_event(ws), await next_event(ws)]
            check(frames[0], EVENT)
            check(frames[1], RESPONSE)
            root = world.mm.post(world.owner, world.dm, "hello @boxmaker")
            world.mm.edit(world.owner, root["id"], "hello again")
            world.mm.react(world.owner, root["id"], "thumbsup")
            world.mm.typing(world.owner, world.dm)
            world.mm.delete(world.owner, root["id"])
            events = [await next_event(ws) for _ in range(5)]
        for event in events:
            check(event, EVENT)
        assert [e["event"] for e in events] == [
            "posted",
            "post_edited",
            "reaction_added",
            "typing",
            "post_deleted",
        ]
        check(events[0]["data"], POSTED_DATA)
        for event in (events[0], events[1], events[4]):
            check(msgspec.json.decode(event["data"]["post"]), POST)
        check(msgspec.json.decode(events[2]["data"]["reaction"]), REACTION)
