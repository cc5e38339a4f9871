"""What keeps the dashboard safe: paths stay under the served folder; the token."""

from __future__ import annotations

import os
import posixpath
import secrets
from typing import Any

TOKEN_COOKIE = "fasttune_token"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class OutsideRootError(LookupError):
    """A requested path that is not inside the served folder."""


def confine(root: str, relative: str) -> str:
    """The real path of ``relative`` under ``root``.

    Raises:
        OutsideRootError: ``relative`` is absolute, or leads outside ``root`` (``..``,
            a symlink out).
    """
    if not relative or "\x00" in relative or os.path.isabs(relative):
        raise OutsideRootError(f"not a path inside the served folder: {relative!r}")
    real_root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(real_root, relative))
    if path != real_root and os.path.commonpath([real_root, path]) != real_root:
        raise OutsideRootError(f"not a path inside the served folder: {relative!r}")
    return path


def confine_key(relative: str) -> str:
    """``relative`` as a normalised key below the served URL (object stores have no
    symlinks, so the text alone decides).

    Raises:
        OutsideRootError: ``relative`` is empty, absolute, holds a backslash, a NUL or
            a scheme, or leads outside the served prefix (``..``).
    """
    bad = not relative or any(c in relative for c in ("\x00", "\\")) or "://" in relative
    key = posixpath.normpath(relative) if not bad else ""
    if bad or relative.startswith("/") or key == ".." or key.startswith("../"):
        raise OutsideRootError(f"not a path inside the served folder: {relative!r}")
    return key


def resolve_token(host: str, token: str | None) -> str | None:
    """The token requests must carry: the given one; a new one off loopback; else None."""
    if token is not None:
        if len(token) < 8:
            raise ValueError(f"--token must be 8 characters or more, got {len(token)}.")
        return token
    if host in LOOPBACK:
        return None
    return secrets.token_urlsafe(18)


class TokenMiddleware:
    """ASGI middleware: 401 for every HTTP request without the token."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse

        request = Request(scope)
        given = request.query_params.get("token")
        header = request.headers.get("authorization", "")
        candidates = [given, request.cookies.get(TOKEN_COOKIE)]
        if header.lower().startswith("bearer "):
            candidates.append(header[7:].strip())
        if not any(c and secrets.compare_digest(c, self.token) for c in candidates):
            response = PlainTextResponse(
                "401: this dashboard needs its token: open the URL `fasttune dashboard` "
                "printed (…?token=…).",
                status_code=401,
            )
            await response(scope, receive, send)
            return
        if given:

            async def send_with_cookie(message: Any) -> None:
                if message["type"] == "http.response.start":
                    cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                    message.setdefault("headers", []).append((b"set-cookie", cookie.encode()))
                await send(message)

            await self.app(scope, receive, send_with_cookie)
            return
        await self.app(scope, receive, send)
