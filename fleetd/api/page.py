"""The live fleet page: ``/``, ``/page.css`` and ``/page.js``, plus ``/page/caller``.

Three static files shipped in the package (``fleetd/api/static/``): no build step, nothing fetched
from elsewhere. They hold no data, so they are served without a token; the script asks for one,
keeps it in ``sessionStorage`` (never a URL, never a cookie) and reads ``GET /v1/fleet`` (long-poll)
and ``GET /v1/incidents`` with ``Authorization: Bearer``. ``GET /page/caller`` tells the page who
the token stands for (role and name, never the token).

Every page response carries a strict Content-Security-Policy (same-origin script, style and
fetches only; no inline code), ``nosniff``, ``no-referrer`` and an ``ETag`` with
``Cache-Control: no-cache``, so a browser revalidates and an upgraded fleetd's page is seen at
once. None of these routes is in ``/openapi.json``: they are not part of the API.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fleetd.api.auth import Authenticator, bearer_challenge
from fleetd.errors import AuthError

__all__ = ["CALLER_PATH", "PAGE_FILES", "SECURITY_HEADERS", "install_page"]

CALLER_PATH = "/page/caller"

#: Route -> (file in ``fleetd/api/static``, media type).
PAGE_FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
}

#: Sent with every page response (and the caller answer).
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True, slots=True)
class _File:
    body: bytes
    media_type: str
    etag: str


def _load(name: str, media_type: str) -> _File:
    body = resources.files("fleetd.api").joinpath("static", name).read_bytes()
    return _File(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


def _serve(file: _File, request: Request) -> Response:
    headers = {**SECURITY_HEADERS, "ETag": file.etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == file.etag:
        return Response(status_code=304, headers=headers)
    return Response(file.body, media_type=file.media_type, headers=headers)


def install_page(app: FastAPI, authenticator: Authenticator) -> None:
    """Serve the page's three files and the caller answer; none of them in the schema."""
    for path, (name, media_type) in PAGE_FILES.items():
        file = _load(name, media_type)

        async def page(request: Request, _file: _File = file) -> Response:
            return _serve(_file, request)

        app.add_api_route(path, page, methods=["GET"], include_in_schema=False)

    async def caller(request: Request) -> Response:
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
        presented = request.headers.get("authorization")
        try:
            who = authenticator.authenticate(presented)
        except AuthError as error:
            challenge = {"WWW-Authenticate": bearer_challenge(presented=bool(presented))}
            body = {"ok": False, "error": {"code": "unauthenticated", "message": str(error)}}
            return JSONResponse(body, status_code=401, headers={**headers, **challenge})
        result = {"role": str(who.role), "name": who.name}
        return JSONResponse({"ok": True, "result": result}, headers=headers)

    app.add_api_route(CALLER_PATH, caller, methods=["GET"], include_in_schema=False)
