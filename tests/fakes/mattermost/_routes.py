"""The ASGI application: API v4 routes, the bearer token, the rate limiter, the error JSON.

Routes and their status codes follow `server/channels/api4/` (post.go InitPost: create 201,
patch, get, delete, thread, channel posts; user.go: me, by id, by username, typing;
channel.go: get, direct 201; reaction.go: save 200, list) and `api/v4/source/*.yaml`. Every
route but /system/ping needs a session (APISessionRequired): without a token, or with an unknown
or revoked one, the answer is 401 `api.context.session_expired.app_error`. Errors are
model.AppError JSON `{id, message, detailed_error, request_id, status_code}` with the request id
also in `X-Request-Id` (web/handlers.go ServeHTTP).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import msgspec

from ._model import (
    SERVER_VERSION,
    SESSION_EXPIRED,
    ApiError,
    invalid_param,
    invalid_url_param,
    is_valid_id,
    new_id,
    permission_error,
)
from ._ratelimit import RateLimiter
from ._store import PER_PAGE_DEFAULT, PER_PAGE_MAXIMUM, Store
from ._websocket import Hub, Receive, Scope, Send, serve_websocket, token_from

Handler = Callable[["Request"], tuple[int, Any]]


@dataclass
class Request:
    """What a route needs of an HTTP request."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    user_id: str = ""
    params: dict[str, str] = field(default_factory=dict)

    def json(self, name: str) -> Any:
        """The body as JSON, or the server's 400 naming `name`."""
        try:
            return msgspec.json.decode(self.body)
        except msgspec.DecodeError:
            raise invalid_param(name) from None

    def int_query(self, name: str, default: int) -> int:
        """web/params.go: a missing or bad number is the default."""
        try:
            value = int(self.query.get(name, [""])[0])
        except ValueError:
            return default
        return value if value >= 0 else default


@dataclass(frozen=True)
class Recorded:
    """One request the fake answered."""

    method: str
    path: str
    status: int


class Api:
    """The routes over a store and a hub."""

    def __init__(
        self,
        store: Store,
        hub: Hub,
        limiter: RateLimiter,
        answered: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.hub = hub
        self.limiter = limiter
        self.requests: list[Recorded] = []
        self._answered = answered
        """Called after each request is answered (and recorded)."""
        self.lose_answers: list[tuple[str, str, bytes]] = []
        """(method, path, a part of the body) of requests to do and then answer 500, as a
        server whose answer was lost after it committed (one each)."""
        s = r"(?P<{}>[A-Za-z0-9]+)"
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("GET", re.compile(r"/users/me"), self.me),
            (
                "GET",
                re.compile(r"/users/username/(?P<username>[A-Za-z0-9.\-_]+)"),
                self.user_by_name,
            ),
            ("GET", re.compile("/users/" + s.format("user_id")), self.user_by_id),
            ("POST", re.compile("/users/" + s.format("user_id") + "/typing"), self.typing),
            ("POST", re.compile(r"/channels/direct"), self.direct),
            ("GET", re.compile("/channels/" + s.format("channel_id")), self.channel),
            (
                "GET",
                re.compile("/channels/" + s.format("channel_id") + "/posts"),
                self.channel_posts,
            ),
            ("POST", re.compile(r"/posts"), self.create_post),
            ("GET", re.compile("/posts/" + s.format("post_id")), self.get_post),
            ("DELETE", re.compile("/posts/" + s.format("post_id")), self.delete_post),
            ("PUT", re.compile("/posts/" + s.format("post_id") + "/patch"), self.patch_post),
            ("GET", re.compile("/posts/" + s.format("post_id") + "/thread"), self.thread),
            ("GET", re.compile("/posts/" + s.format("post_id") + "/reactions"), self.reactions),
            ("POST", re.compile(r"/reactions"), self.save_reaction),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        elif scope["type"] == "websocket":
            verdict = self.limiter.check(self._limit_key(scope))
            path = scope["path"]
            if verdict.limited:
                await receive()
                await send(
                    {
                        "type": "websocket.http.response.start",
                        "status": 429,
                        "headers": verdict.headers,
                    }
                )
                await send({"type": "websocket.http.response.body", "body": b"limit exceeded\n"})
                self._record(Recorded("GET", path, 429))
            elif path.rstrip("/") == "/api/v4/websocket":
                self._record(Recorded("GET", path, 101))
                await serve_websocket(self.hub, scope, receive, send)
            else:
                await receive()
                await send({"type": "websocket.close", "code": 1000})
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    def _limit_key(self, scope: Scope) -> str:
        token = token_from(scope)
        return token if token is not None else str((scope.get("client") or ("", 0))[0])

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method, path = scope["method"], unquote(scope["path"])
        request_id = new_id()
        headers = [
            (b"x-request-id", request_id.encode()),
            (b"x-version-id", SERVER_VERSION.encode()),
        ]
        verdict = self.limiter.check(self._limit_key(scope))
        headers += verdict.headers
        if verdict.limited:
            await _respond(send, 429, b"limit exceeded\n", headers, b"text/plain; charset=utf-8")
            self._record(Recorded(method, path, 429))
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        request = Request(method, path, query, body)
        try:
            status, payload = self._dispatch(scope, request)
            lost = [
                lose
                for lose in self.lose_answers
                if lose[:2] == (method, path) and lose[2] in body and status < 400
            ]
            if lost:
                self.lose_answers.remove(lost[0])
                raise ApiError(500, "app.lost", "The answer was lost after the work was done.")
        except ApiError as error:
            status, payload = error.status, error.to_json(request_id)
        await _respond(
            send, status, msgspec.json.encode(payload) if payload is not None else b"", headers
        )
        self._record(Recorded(method, path, status))

    def _record(self, request: Recorded) -> None:
        self.requests.append(request)
        self._answered()

    def _dispatch(self, scope: Scope, request: Request) -> tuple[int, Any]:
        if not request.path.startswith("/api/v4/"):
            raise ApiError(404, "api.context.404.app_error", "Sorry, we could not find the page.")
        tail = request.path[len("/api/v4") :].rstrip("/") or "/"
        if tail == "/system/ping":
            return 200, {"status": "OK"}
        allowed = False
        for method, pattern, handler in self.routes:
            match = pattern.fullmatch(tail)
            if match is None:
                continue
            allowed = True
            if method != request.method:
                continue
            token = token_from(scope)
            if token is None or token not in self.store.tokens:
                raise SESSION_EXPIRED
            request.user_id = self.store.tokens[token]
            request.params = match.groupdict()
            for name, value in request.params.items():
                if name.endswith("_id") and not is_valid_id(value):
                    raise invalid_url_param(name)
            return handler(request)
        if allowed:
            return 405, None
        raise ApiError(404, "api.context.404.app_error", "Sorry, we could not find the page.")

    # users

    def me(self, request: Request) -> tuple[int, Any]:
        """GET /users/me."""
        return 200, self.store.user(request.user_id).to_json(me=True)

    def user_by_id(self, request: Request) -> tuple[int, Any]:
        """GET /users/{user_id}."""
        user_id = request.params["user_id"]
        return 200, self.store.user(user_id).to_json(me=user_id == request.user_id)

    def user_by_name(self, request: Request) -> tuple[int, Any]:
        """GET /users/username/{username}."""
        name = request.params["username"].lower()
        for user in self.store.users.values():
            if user.username == name:
                return 200, user.to_json(me=user.id == request.user_id)
        raise ApiError(404, "app.user.missing_account.const", "Unable to find the user.")

    def typing(self, request: Request) -> tuple[int, Any]:
        """POST /users/{user_id}/typing (another user's needs manage_system)."""
        if request.params["user_id"] != request.user_id:
            raise permission_error("manage_system")
        channel_id, parent_id = self.store.check_typing_body(request.json("typing_request"))
        self.store.typing(request.user_id, channel_id, parent_id)
        return 200, {"status": "OK"}

    # channels

    def direct(self, request: Request) -> tuple[int, Any]:
        """POST /channels/direct with the two user ids: 201 and the (maybe existing) channel."""
        ids = request.json("user_ids")
        if not isinstance(ids, list) or len(ids) != 2 or not all(is_valid_id(i) for i in ids):
            raise invalid_param("user_ids")
        if request.user_id not in ids:
            raise permission_error("manage_system")
        other = ids[1] if ids[0] == request.user_id else ids[0]
        self.store.user(other)
        return 201, self.store.direct_channel(request.user_id, other).to_json()

    def channel(self, request: Request) -> tuple[int, Any]:
        """GET /channels/{channel_id}."""
        return 200, self.store.readable(request.user_id, request.params["channel_id"]).to_json()

    def channel_posts(self, request: Request) -> tuple[int, Any]:
        """GET /channels/{channel_id}/posts: `since`, else `page` and `per_page`."""
        channel_id = request.params["channel_id"]
        since_text = request.query.get("since", [""])[0]
        if since_text:
            try:
                since = int(since_text)
            except ValueError:
                raise invalid_param("since") from None
            if since > 0:
                return 200, self.store.posts_since(request.user_id, channel_id, since)
        per_page = min(request.int_query("per_page", PER_PAGE_DEFAULT), PER_PAGE_MAXIMUM)
        page = request.int_query("page", 0)
        return 200, self.store.posts_page(request.user_id, channel_id, page, per_page)

    # posts

    def create_post(self, request: Request) -> tuple[int, Any]:
        """POST /posts: 201."""
        body = request.json("post")
        if not isinstance(body, dict):
            raise invalid_param("post")
        set_online = request.query.get("set_online", ["true"])[0].lower() not in ("false", "0", "f")
        return 201, self.store.create_post(request.user_id, body, set_online=set_online)

    def get_post(self, request: Request) -> tuple[int, Any]:
        """GET /posts/{post_id}."""
        return 200, self.store.get_post(request.user_id, request.params["post_id"])

    def delete_post(self, request: Request) -> tuple[int, Any]:
        """DELETE /posts/{post_id}."""
        self.store.delete_post(request.user_id, request.params["post_id"])
        return 200, {"status": "OK"}

    def patch_post(self, request: Request) -> tuple[int, Any]:
        """PUT /posts/{post_id}/patch."""
        patch = request.json("post")
        if not isinstance(patch, dict):
            raise invalid_param("post")
        return 200, self.store.patch_post(request.user_id, request.params["post_id"], patch)

    def thread(self, request: Request) -> tuple[int, Any]:
        """GET /posts/{post_id}/thread."""
        return 200, self.store.thread(request.user_id, request.params["post_id"])

    def reactions(self, request: Request) -> tuple[int, Any]:
        """GET /posts/{post_id}/reactions."""
        return 200, self.store.reactions_for(request.user_id, request.params["post_id"])

    def save_reaction(self, request: Request) -> tuple[int, Any]:
        """POST /reactions."""
        body = request.json("reaction")
        if not isinstance(body, dict):
            raise invalid_param("reaction")
        return 200, self.store.save_reaction(request.user_id, body)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    content_type: bytes = b"application/json",
) -> None:
    all_headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})
