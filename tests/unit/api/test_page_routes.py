"""The live page's routes on the app ``fleetd serve`` builds: the three files with strict headers
and no token needed, revalidation by ETag, nothing of them in ``/openapi.json``, and nothing in the
files that points off this fleetd."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import httpx
import pytest

from fleetd.api.app import create_app
from fleetd.api.page import PAGE_FILES
from fleetd.testing import build_test_fleet


def _client(tmp_path: Path) -> httpx.AsyncClient:
    app = create_app(build_test_fleet(tmp_path).service)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fleetd")


@pytest.mark.parametrize("path", list(PAGE_FILES))
async def test_each_page_file_is_served_without_a_token_with_strict_headers(
    tmp_path: Path, path: str
) -> None:
    """No token needed (the files hold no data); same-origin-only CSP without inline code,
    nosniff, no-referrer, the media type, and an ETag that a revalidation answers with 304."""
    async with _client(tmp_path) as http:
        answer = await http.get(path)
        again = await http.get(path, headers={"If-None-Match": answer.headers["etag"]})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == PAGE_FILES[path][1]
    csp = answer.headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "script-src 'self';" in csp
    assert "style-src 'self';" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["cache-control"] == "no-cache"
    assert again.status_code == 304
    assert again.content == b""


async def test_the_page_routes_are_not_in_the_openapi_document(tmp_path: Path) -> None:
    """``/openapi.json`` lists the API only: none of the page's paths."""
    async with _client(tmp_path) as http:
        document = (await http.get("/openapi.json")).json()
    assert not set(document["paths"]) & set(PAGE_FILES)
    assert "/v1/fleet" in document["paths"]


def test_the_page_files_point_nowhere_but_this_fleetd() -> None:
    """No URL with a scheme or a protocol-relative one in the three files: nothing is fetched
    from elsewhere; the script writes data as text (no innerHTML) and names no cookie."""
    folder = resources.files("fleetd.api").joinpath("static")
    for name, _media in PAGE_FILES.values():
        text = folder.joinpath(name).read_text(encoding="utf-8")
        assert not re.search(r"https?:|(?<![:\w])//[\w.-]+\.\w", text), name
        assert "innerHTML" not in text
        assert "document.cookie" not in text
        assert "localStorage" not in text
