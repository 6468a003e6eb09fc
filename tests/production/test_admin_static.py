"""DJANGO_DEBUG=false on the production server: the admin loads with its CSS.

gunicorn (uvicorn workers) serves the app after the release step's collectstatic; whitenoise serves
the hashed, compressed files. Debian's chromium, driven by Playwright, renders the admin login page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.console.test_browser import CHROMIUM_ARGS, require_chromium
from tests.support.server import ROOT, production_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def production_env(tmp_path_factory):
    """An environment with DEBUG off, its own SQLite database, migrated, and collected static files."""
    workdir = tmp_path_factory.mktemp("production")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "REDIS_URL"))}
    env.update(
        DJANGO_DEBUG="false", DJANGO_SECRET_KEY="production-test-secret-" + "k" * 40, ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="false", DATABASE_URL=f"sqlite:///{workdir}/db.sqlite3", STATIC_ROOT=str(workdir / "static"),
    )
    for command in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):  # the Procfile's release step
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, capture_output=True,
                       timeout=300)
    return env


@pytest.fixture(scope="module")
def server(production_env):
    with production_server(env=production_env) as proc:
        yield proc


def test_the_release_step_writes_hashed_and_compressed_static_files(production_env):
    static = ROOT.joinpath(production_env["STATIC_ROOT"])
    assert (static / "staticfiles.json").is_file()
    hashed = [p.name for p in (static / "admin" / "css").glob("base.*.css")]
    assert any(re.fullmatch(r"base\.[0-9a-f]{12}\.css", name) for name in hashed), hashed
    assert list((static / "admin" / "css").glob("base.*.css.gz"))


def test_static_files_are_served_compressed_with_a_long_cache_lifetime(server):
    page = httpx.get(server.base_url + "/admin/login/", timeout=10)
    assert page.status_code == 200
    css = re.search(r'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', page.text)
    assert css, "the admin must link the hashed stylesheet from the manifest"
    response = httpx.get(server.base_url + css.group(1), headers={"Accept-Encoding": "gzip"}, timeout=10)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/css")
    assert response.headers.get("content-encoding") == "gzip"
    assert "max-age=315360000" in response.headers.get("cache-control", "")


def test_the_admin_login_page_renders_with_its_css_in_chromium(server):
    from playwright.sync_api import sync_playwright

    executable = require_chromium()
    failed = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800}, color_scheme="light")
            page.on("response", lambda r: failed.append((r.url, r.status)) if r.status >= 400 else None)
            page.goto(server.base_url + "/admin/login/")
            sheets = page.evaluate("""() => [...document.styleSheets].map(s => [s.href, s.cssRules.length])""")
            header_bg = page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor")
            button_bg = page.evaluate("getComputedStyle(document.querySelector('input[type=submit]')).backgroundColor")
        finally:
            browser.close()
    assert not failed, failed
    assert any(href and "/static/admin/css/base." in href and rules > 50 for href, rules in sheets), sheets
    # Without its CSS the header and the button are transparent; base.css paints them the admin's blue.
    assert header_bg not in ("rgba(0, 0, 0, 0)", "transparent"), header_bg
    assert button_bg not in ("rgba(0, 0, 0, 0)", "transparent", "rgb(239, 239, 239)"), button_bg
