"""What the fake Mattermost enforces and returns, as the real server does (see its docstrings)."""

from __future__ import annotations

import httpx
import msgspec
import pytest
import trio
from fakes.mattermost import ApiError
from fakes.world import CAP_S, World, next_event
from trio_websocket import ConnectionClosed, ConnectionRejected


def encode(value: object) -> str:
    return msgspec.json.encode(value).decode()


async def test_a_retried_create_with_the_same_pending_post_id_returns_the_same_post(
    world: World,
) -> None:
    body = {"channel_id": world.dm, "message": "answer", "pending_post_id": "bot:1"}
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            first = await c.post("/api/v4/posts", json=body)
            again = await c.post("/api/v4/posts", json=body)
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json()["id"] == again.json()["id"]
    assert first.json()["pending_post_id"] == "bot:1"
    assert again.json()["pending_post_id"] == ""  # fetched again, as deduplicateCreatePost does
    assert world.mm.creates("bot:1") == 1
    assert world.mm.create_requests("bot:1") == 2
    assert len(world.mm.live_posts(world.dm)) == 1


async def test_dedup_lasts_only_the_cache_window_and_forgets_a_failed_create(world: World) -> None:
    mm = world.mm
    with pytest.raises(ApiError, match="root_id"):
        mm.post(world.bot, world.dm, "reply", root_id="x" * 26, pending_post_id="p")
    mm.post(world.bot, world.dm, "first", pending_post_id="p")
    assert mm.creates("p") == 1  # the failed create did not take the id
    mm.pending_post_ttl_s = 0.0  # the server's window is 30 s
    mm.post(world.bot, world.dm, "later", pending_post_id="q")
    mm.post(world.bot, world.dm, "later", pending_post_id="q")
    assert mm.creates("q") == 2


async def test_since_returns_deleted_posts_and_the_copies_edits_leave(world: World) -> None:
    mm = world.mm
    before = mm.store.clock.now_ms()
    root = mm.post(world.owner, world.dm, "question")
    answer = mm.post(world.bot, world.dm, "draft", root_id=root["id"])
    mm.edit(world.bot, answer["id"], "final answer")
    doomed = mm.post(world.owner, world.dm, "oops")
    mm.delete(world.owner, doomed["id"])
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            got = await c.get(f"/api/v4/channels/{world.dm}/posts", params={"since": before})
    posts = got.json()["posts"]
    order = got.json()["order"]
    copies = [p for p in posts.values() if p["original_id"] == answer["id"]]
    assert len(copies) == 1
    assert copies[0]["delete_at"] > 0
    assert copies[0]["message"] == ""
    assert posts[answer["id"]]["message"] == "final answer"
    assert posts[answer["id"]]["edit_at"] > 0
    assert posts[doomed["id"]]["delete_at"] > 0
    assert posts[doomed["id"]]["message"] == ""
    assert set(order) == set(posts)
    create_ats = [posts[i]["create_at"] for i in order]
    assert create_ats == sorted(create_ats, reverse=True)
    # the stored history keeps every version, with its words
    assert [p.message for p in mm.channel_posts(world.dm) if p.id == copies[0]["id"]] == ["draft"]


async def test_a_reply_and_a_reaction_bump_the_posts_update_at(world: World) -> None:
    mm = world.mm
    root = mm.post(world.owner, world.dm, "question")
    reply = mm.post(world.bot, world.dm, "answer", root_id=root["id"])
    assert mm.store.posts[root["id"]].update_at == reply["create_at"]
    before = mm.store.posts[root["id"]].update_at
    mm.react(world.owner, reply["id"], "thumbsup")
    stored = mm.store.posts[reply["id"]]
    assert stored.update_at > reply["update_at"]
    assert stored.has_reactions
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            got = await c.get(f"/api/v4/channels/{world.dm}/posts", params={"since": before})
    assert got.json()["order"] == [reply["id"]]
    assert root["id"] in got.json()["posts"]  # its root comes along, outside the order
    assert got.json()["posts"][reply["id"]]["metadata"]["reactions"][0]["emoji_name"] == "thumbsup"


async def test_root_id_must_be_a_root_post_of_the_same_channel(world: World) -> None:
    mm = world.mm
    root = mm.post(world.owner, world.dm, "root")
    reply = mm.post(world.bot, world.dm, "reply", root_id=root["id"])
    elsewhere = mm.create_channel("town-square", world.owner, world.bot)
    cases = [
        ({"channel_id": world.dm, "root_id": "x" * 26}, "api.post.create_post.root_id.app_error"),
        (
            {"channel_id": world.dm, "root_id": reply["id"]},
            "api.post.create_post.root_id.app_error",
        ),
        (
            {"channel_id": elsewhere, "root_id": root["id"]},
            "api.post.create_post.channel_root_id.app_error",
        ),
    ]
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            for body, error_id in cases:
                got = await c.post("/api/v4/posts", json={**body, "message": "m"})
                assert (got.status_code, got.json()["id"]) == (400, error_id)


async def test_messages_are_limited_to_16383_runes(world: World) -> None:
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            ok = await c.post(
                "/api/v4/posts", json={"channel_id": world.dm, "message": "é" * 16383}
            )
            long = await c.post(
                "/api/v4/posts", json={"channel_id": world.dm, "message": "a" * 16384}
            )
            edit = await c.put(
                f"/api/v4/posts/{ok.json()['id']}/patch", json={"message": "b" * 20000}
            )
    assert ok.status_code == 201
    assert (long.status_code, long.json()["id"]) == (
        400,
        "model.post.is_valid.message_length.app_error",
    )
    assert edit.status_code == 400
    assert world.mm.live_posts(world.dm)[0].message == "é" * 16383


async def test_every_route_needs_a_known_unrevoked_token(world: World) -> None:
    token = world.mm.issue_token(world.bot)
    with trio.fail_after(CAP_S):
        async with world.client() as c:
            missing = await c.get("/api/v4/users/me")
            wrong = await c.get("/api/v4/users/me", headers={"Authorization": "Bearer nope"})
            fine = await c.get("/api/v4/users/me", headers={"Authorization": f"Token {token}"})
            world.mm.revoke_token(token)
            revoked = await c.get("/api/v4/users/me", headers={"Authorization": f"Bearer {token}"})
            ping = await c.get("/api/v4/system/ping")
    for got in (missing, wrong, revoked):
        assert got.status_code == 401
        assert got.json()["id"] == "api.context.session_expired.app_error"
        assert got.json()["request_id"] == got.headers["x-request-id"]
    assert fine.json()["username"] == "boxmaker"
    assert fine.json()["is_bot"] is True
    assert ping.status_code == 200


async def test_patching_someone_elses_post_is_forbidden(world: World) -> None:
    theirs = world.mm.post(world.owner, world.dm, "mine")
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            got = await c.put(f"/api/v4/posts/{theirs['id']}/patch", json={"message": "no"})
            peek = await c.get(f"/api/v4/posts/{theirs['id']}")
        async with world.client(world.stranger) as c:
            hidden = await c.get(f"/api/v4/posts/{theirs['id']}")
    assert (got.status_code, got.json()["id"]) == (403, "api.context.permissions.app_error")
    assert peek.json()["message"] == "mine"
    assert hidden.status_code == 403


async def test_rate_limit_answers_429_with_the_servers_headers(world: World) -> None:
    world.mm.rate_limit(1.0, burst=1)
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            answers = [await c.get("/api/v4/users/me") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].headers["x-ratelimit-limit"] == "2"
    assert answers[0].headers["x-ratelimit-remaining"] == "1"
    assert answers[1].headers["x-ratelimit-remaining"] == "0"
    limited = answers[2]
    assert limited.text == "limit exceeded\n"
    assert limited.headers["content-type"].startswith("text/plain")
    assert int(limited.headers["retry-after"]) >= 1
    assert int(limited.headers["x-ratelimit-reset"]) >= 1


async def test_a_storm_refuses_the_next_requests_then_passes(world: World) -> None:
    world.mm.storm(2)
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            answers = [(await c.get("/api/v4/users/me")).status_code for _ in range(3)]
    assert answers == [429, 429, 200]


async def test_the_websocket_says_hello_then_posted_with_the_post_as_a_string(world: World) -> None:
    mm = world.mm
    with trio.fail_after(CAP_S):
        async with world.ws(world.bot) as ws:
            hello = await next_event(ws)
            post = mm.post(world.owner, world.dm, "hi @boxmaker", props={"x": 1})
            posted = await next_event(ws)
            mm.react(world.owner, post["id"], "eyes")
            reacted = await next_event(ws)
    assert hello["event"] == "hello"
    assert hello["broadcast"]["user_id"] == world.bot.id
    assert hello["seq"] == 0
    assert posted["event"] == "posted"
    assert posted["seq"] == 1
    assert isinstance(posted["data"]["post"], str)
    assert msgspec.json.decode(posted["data"]["post"])["message"] == "hi @boxmaker"
    assert posted["data"]["channel_type"] == "D"
    assert posted["data"]["sender_name"] == "@owner"
    assert msgspec.json.decode(posted["data"]["mentions"]) == [world.bot.id]
    assert posted["broadcast"]["channel_id"] == world.dm
    assert reacted["event"] == "reaction_added"
    assert msgspec.json.decode(reacted["data"]["reaction"])["emoji_name"] == "eyes"
    assert reacted["seq"] == 2


async def test_events_reach_only_those_who_can_see_the_channel(world: World) -> None:
    mm = world.mm
    with trio.fail_after(CAP_S):
        async with (
            world.ws(world.stranger) as outsider,
            world.ws(world.owner) as owner,
        ):
            assert (await next_event(outsider))["event"] == "hello"
            assert (await next_event(owner))["event"] == "hello"
            mm.post(world.bot, world.dm, "for the owner only")
            assert (await next_event(owner))["event"] == "posted"
            # a response comes after anything queued before it: nothing was queued for him
            await outsider.send_message(encode({"seq": 1, "action": "nope"}))
            assert (await next_event(outsider))["status"] == "FAIL"


async def test_authentication_by_challenge(world: World) -> None:
    with trio.fail_after(CAP_S):
        async with world.ws() as ws:
            await ws.send_message(encode({"seq": 1, "action": "user_typing", "data": {}}))
            refused = await next_event(ws)
            challenge = {"token": world.bot.token}
            await ws.send_message(
                encode({"seq": 2, "action": "authentication_challenge", "data": challenge})
            )
            hello = await next_event(ws)
            ok = await next_event(ws)
    assert refused["error"]["id"] == "api.web_socket_router.not_authenticated.app_error"
    assert refused["seq_reply"] == 1
    assert hello["event"] == "hello"
    assert ok == {"status": "OK", "seq_reply": 2}


async def test_a_bad_token_is_refused_before_the_upgrade_or_closes_the_socket(world: World) -> None:
    with trio.fail_after(CAP_S):
        refused = pytest.RaisesExc(
            ConnectionRejected,
            check=lambda e: e.status_code == 401 and b"session_expired" in (e.body or b""),
        )
        with pytest.RaisesGroup(refused, flatten_subgroups=True):
            async with world.ws(headers=[("Authorization", "Bearer x")]):
                pass
        async with world.ws() as ws:
            bad = {"seq": 1, "action": "authentication_challenge", "data": {"token": "x"}}
            await ws.send_message(encode(bad))
            with pytest.raises(ConnectionClosed):
                await ws.get_message()


async def test_a_revoked_token_gets_no_more_events(world: World) -> None:
    mm = world.mm
    with trio.fail_after(CAP_S):
        async with world.ws(world.bot) as ws:
            await next_event(ws)
            mm.revoke_token(world.bot.token)
            mm.post(world.owner, world.dm, "unseen")
            await ws.send_message(encode({"seq": 1, "action": "user_typing", "data": {}}))
            answer = await next_event(ws)
    assert answer["error"]["status_code"] == 401


async def test_typing_by_rest_and_by_websocket_reaches_the_other_member(world: World) -> None:
    with trio.fail_after(CAP_S):
        async with (
            world.ws(world.owner) as owner,
            world.ws(world.bot) as bot,
            world.client(world.bot) as c,
        ):
            await next_event(owner)
            await next_event(bot)
            got = await c.post(
                f"/api/v4/users/{world.bot.id}/typing", json={"channel_id": world.dm}
            )
            typing = await next_event(owner)
            action = {"channel_id": world.dm, "parent_id": ""}
            await bot.send_message(encode({"seq": 7, "action": "user_typing", "data": action}))
            again = await next_event(owner)
            reply = await next_event(bot)  # the bot's own typing is omitted: its reply comes first
            other = await c.post(
                f"/api/v4/users/{world.owner.id}/typing", json={"channel_id": world.dm}
            )
    assert got.json() == {"status": "OK"}
    assert typing["event"] == again["event"] == "typing"
    assert typing["data"] == {"parent_id": "", "user_id": world.bot.id}
    assert typing["broadcast"]["omit_users"] == {world.bot.id: True}
    assert reply == {"status": "OK", "seq_reply": 7}
    assert other.status_code == 403


async def test_dropped_websockets_close_without_a_close_frame_and_can_reconnect(
    world: World,
) -> None:
    mm = world.mm
    with trio.fail_after(CAP_S):
        async with world.ws(world.bot) as ws:
            await next_event(ws)
            await mm.wait_for_websockets(1, world.bot)
            assert mm.drop_websockets() == 1
            with pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
        assert closed.value.reason is not None
        assert closed.value.reason.code == 1006  # abnormal: no close frame was sent
        await mm.wait_for_websockets(0)
        async with world.ws(world.bot) as ws:
            assert (await next_event(ws))["event"] == "hello"


async def test_a_server_that_is_down_refuses_connections_and_comes_back_as_it_was(
    world: World,
) -> None:
    mm = world.mm
    post = mm.post(world.owner, world.dm, "kept")
    url = mm.url
    await mm.go_down()
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            with pytest.raises(httpx.ConnectError):
                await c.get("/api/v4/users/me")
        with pytest.raises(OSError, match="all attempts to connect"):
            await trio.open_tcp_stream("127.0.0.1", mm.front.port)
        await mm.come_up()
        assert mm.url == url
        async with world.client(world.bot) as c:
            got = await c.get(f"/api/v4/posts/{post['id']}")
    assert got.json()["message"] == "kept"


async def test_reads_users_channels_threads_and_pages(world: World) -> None:
    mm = world.mm
    root = mm.post(world.owner, world.dm, "root")
    reply = mm.post(world.bot, world.dm, "reply", root_id=root["id"])
    newest = mm.post(world.owner, world.dm, "newest")
    with trio.fail_after(CAP_S):
        async with world.client(world.bot) as c:
            me = (await c.get("/api/v4/users/me")).json()
            owner = (await c.get("/api/v4/users/username/owner")).json()
            direct = await c.post("/api/v4/channels/direct", json=[world.bot.id, world.owner.id])
            thread = (await c.get(f"/api/v4/posts/{reply['id']}/thread")).json()
            page = (
                await c.get(f"/api/v4/channels/{world.dm}/posts", params={"per_page": 2})
            ).json()
            bad_id = await c.get("/api/v4/posts/short")
            unknown = await c.get("/api/v4/nothing/here")
    assert "notify_props" in me
    assert "notify_props" not in owner
    assert owner["id"] == world.owner.id
    assert (direct.status_code, direct.json()["id"]) == (201, world.dm)
    assert direct.json()["name"] == "__".join(sorted([world.owner.id, world.bot.id]))
    assert thread["order"][0] == reply["id"]
    assert set(thread["order"]) == {root["id"], reply["id"]}
    assert page["order"] == [newest["id"], reply["id"]]
    assert root["id"] in page["posts"]  # the thread of a post on the page comes along
    assert page["prev_post_id"] == root["id"]
    assert bad_id.status_code == 400
    assert unknown.status_code == 404


async def test_the_fake_finds_mentions_as_the_server_would(world: World) -> None:
    mm = world.mm
    channel = mm.create_channel("town-square", world.owner, world.bot, world.stranger)
    with trio.fail_after(CAP_S):
        async with world.ws(world.stranger) as ws:
            await next_event(ws)
            mm.post(world.bot, channel, "`@stranger` is quoted, \\@stranger is not")
            posted = await next_event(ws)
    post = mm.live_posts(channel)[-1]
    assert mm.mentions(post).users == {"stranger"}
    assert msgspec.json.decode(posted["data"]["mentions"]) == [world.stranger.id]
    assert not mm.mentions("&#64;stranger and `@channel`")
    assert mm.mentions(post)
