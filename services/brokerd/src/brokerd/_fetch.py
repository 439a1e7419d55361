"""`http_fetch`: GET one http or https URL on a granted host, redirects re-checked, capped.

A host entry of a grant is a lower-case name or `[IPv6]` address, which allows the
scheme's default port only, or `host:port`, which allows that port only. Redirects are
followed by hand, each target checked against the grant like the first URL. The body is
read up to the cap and must be text. No proxy from the environment is used: the host
that was checked is the host that is contacted. The caller sets the deadline.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import cast

import httpx

from ._grants import Grant
from ._runtimes import Refusal, RunOutput

__all__ = ["check_url", "host_granted", "http_fetch"]

DEFAULT_PORTS = {"http": 80, "https": 443}
_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-ndjson"}
)
_ACCEPT = "text/*, application/json;q=0.9, application/xml;q=0.9, */*;q=0.1"


def host_granted(url: httpx.URL, hosts: frozenset[str]) -> bool:
    """Whether the URL's host and port are among a grant's `hosts`."""
    host = url.raw_host.decode("ascii").lower()
    shown = f"[{host}]" if ":" in host else host
    default = DEFAULT_PORTS[url.scheme]
    port = url.port or default
    return (shown in hosts and port == default) or f"{shown}:{port}" in hosts


def check_url(raw: str, hosts: frozenset[str], grant_name: str) -> httpx.URL:
    """The parsed URL, if it may be fetched under the grant.

    Raises:
        Refusal: it may not (not a URL, not http or https, a host not granted, ...).
    """
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, ValueError) as exc:
        raise Refusal(RunOutput("error", f"{raw!r} is not a URL: {exc}")) from None
    if url.scheme not in DEFAULT_PORTS:
        raise Refusal(RunOutput("error", f"only http and https URLs are fetched, not {raw!r}"))
    if not url.raw_host:
        raise Refusal(RunOutput("error", f"{raw!r} has no host"))
    if url.userinfo:
        raise Refusal(RunOutput("error", "URLs with a user name or password are not fetched"))
    if not host_granted(url, hosts):
        where = url.netloc.decode("ascii", "replace")
        raise Refusal(
            RunOutput("denied", f"{where} is not among the hosts granted by {grant_name}")
        )
    return url


def _is_text(content_type: str | None) -> bool:
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return (
        media.startswith("text/")
        or media in _TEXT_TYPES
        or media.endswith("+json")
        or media.endswith("+xml")
    )


async def http_fetch(raw: str, grant: Grant, *, max_bytes: int, max_redirects: int) -> RunOutput:
    """GET `raw` under `grant`; the content is the body as text."""
    try:
        url = check_url(raw, grant.hosts, grant.name)
    except Refusal as refusal:
        return refusal.output
    try:
        async with httpx.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=None
        ) as client:
            for _ in range(max_redirects + 1):
                async with client.stream("GET", url, headers={"Accept": _ACCEPT}) as response:
                    if not response.is_redirect:
                        return await _read(url, response, max_bytes)
                    target = url.join(response.headers.get("location", ""))
                try:
                    url = check_url(str(target), grant.hosts, grant.name)
                except Refusal as refusal:
                    refused = refusal.output
                    return RunOutput(
                        refused.status,
                        f"{url} redirects to {target}, not followed: {refused.content}",
                    )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return RunOutput("error", f"cannot fetch {url}: {exc or type(exc).__name__}")
    return RunOutput("error", f"{raw} redirects more than {max_redirects} times; gave up")


async def _read(url: httpx.URL, response: httpx.Response, max_bytes: int) -> RunOutput:
    if not response.is_success:
        return RunOutput(
            "error", f"{url} answered HTTP {response.status_code} {response.reason_phrase}"
        )
    content_type = response.headers.get("content-type")
    if not _is_text(content_type):
        return RunOutput(
            "error", f"{url} is {content_type}, not text; http_fetch returns text only"
        )
    too_large = f"{url} is larger than {max_bytes:,} bytes; http_fetch stops there"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        return RunOutput("error", too_large)
    chunks: list[bytes] = []
    size = 0
    # Leaving early closes the response (and its connection); httpx's inner generators
    # are then collected unexhausted, which trio reports as a ResourceWarning
    # (encode/httpx#3686), harmless.
    body_chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    async with contextlib.aclosing(body_chunks) as body:
        async for chunk in body:
            size += len(chunk)
            if size > max_bytes:
                return RunOutput("error", too_large)
            chunks.append(chunk)
    encoding = response.charset_encoding or "utf-8"
    try:
        return RunOutput("ok", b"".join(chunks).decode(encoding, errors="replace"))
    except LookupError:
        return RunOutput("ok", b"".join(chunks).decode("utf-8", errors="replace"))
