"""The live fleet page: ``/``, ``/page.css`` and ``/page.js``.

Three static files shipped in the package (``fleetd/api/static/``): no build step, nothing fetched
from elsewhere. They hold no data, so they are served without a token; the script asks for one,
keeps it in ``sessionStorage`` (never a URL, never a cookie) and reads ``GET /v1/fleet`` (long-poll)
and ``GET /v1/incidents`` with ``Authorization: Bearer``; ``GET /v1/whoami``
(:mod:`fleetd.api.whoami`) tells it who the token stands for (role, and a lead's name).

Every page response carries a strict Content-Security-Policy (same-origin script, style and
fetches only; no inline code), ``nosniff``, ``no-referrer`` and an ``ETag`` with
``Cache-Control: no-cache``, so a browser revalidates and an upgraded fleetd's page is seen at
once. None of the three is in ``/openapi.json``: they are not part of the API.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["PAGE_FILES", "SECURITY_HEADERS", "install_page"]

#: Route -> (file in ``fleetd/api/static``, media type).
PAGE_FILES: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
}

#: Sent with every page response.
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


def install_page(app: FastAPI) -> None:
    """Serve the page's three files, none of them in the schema."""
    for path, (name, media_type) in PAGE_FILES.items():
        file = _load(name, media_type)

        async def page(request: Request, _file: _File = file) -> Response:
            return _serve(_file, request)

        app.add_api_route(path, page, methods=["GET"], include_in_schema=False)
