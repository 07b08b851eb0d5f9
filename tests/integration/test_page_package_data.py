"""A non-editable install carries the live page: setuptools' ``build_py`` (what a wheel, and so
``pip install``, holds) copies the page's three files, and the page module serves them from the
built tree, not from this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from fleetd.api.page import PAGE_FILES

ROOT = Path(__file__).resolve().parents[2]

_SERVE_FROM_BUILD = """
import asyncio, sys
import httpx
from fastapi import FastAPI
import fleetd
from fleetd.api.page import PAGE_FILES, install_page
assert fleetd.__file__.startswith(sys.argv[1]), fleetd.__file__
app = FastAPI()
install_page(app)
async def main():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleetd") as http:
        for path in PAGE_FILES:
            answer = await http.get(path)
            assert answer.status_code == 200 and answer.content, path
asyncio.run(main())
print("served", len(PAGE_FILES))
"""


def test_the_built_package_holds_and_serves_the_page_files(tmp_path: Path) -> None:
    """``build_py`` on a copy of the project puts index.html, page.css and page.js in
    ``fleetd/api/static``; importing fleetd from that build serves all three."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "fleetd", source / "fleetd", ignore=shutil.ignore_patterns("__pycache__")
    )
    build = tmp_path / "build"
    setup = [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q"]
    subprocess.run(
        [*setup, "build_py", "--build-lib", str(build)],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    built = {p.name for p in (build / "fleetd" / "api" / "static").iterdir()}
    assert built == {name for name, _media in PAGE_FILES.values()}
    env = {**os.environ, "PYTHONPATH": str(build)}
    served = subprocess.run(
        [sys.executable, "-c", _SERVE_FROM_BUILD, str(build)],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.stdout.strip() == f"served {len(PAGE_FILES)}"
