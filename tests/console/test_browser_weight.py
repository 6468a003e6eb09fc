"""The run list transfers only the static files it uses: at most 150 KB compressed (gzip, as whitenoise
serves them) and 300 KB uncompressed."""

from __future__ import annotations

import gzip

import pytest

from tests.console.conftest import support_staff_create
from tests.console.test_browser import _log_in, browser_page, roles  # noqa: F401 (fixtures)
from tests.console.scenarios import happy_run
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
COMPRESSED_LIMIT, UNCOMPRESSED_LIMIT = 150 * 1024, 300 * 1024


def test_the_run_list_loads_only_the_static_files_it_uses(live_server, roles, browser_page):
    support_staff_create("sam")
    happy_run(owner=UserFactory(username="oncall-bot"))
    page = browser_page()
    _log_in(page, live_server, "sam")
    loaded: dict[str, bytes] = {}
    page.on("response", lambda r: loaded.__setitem__(r.url, r.body()) if "/static/" in r.url else None)
    page.goto(f"{live_server.url}/admin/diagnosis/diagnosisrun/")
    page.wait_for_load_state("networkidle")
    assert page.locator("#result_list tbody tr").count() == 1
    raw = sum(len(body) for body in loaded.values())
    compressed = sum(len(gzip.compress(body, 9)) for body in loaded.values())
    sizes = sorted(((len(b), url.rsplit("/static/", 1)[1]) for url, b in loaded.items()), reverse=True)
    print(f"run list static files: {raw:,} bytes, {compressed:,} gzip-compressed, {len(loaded)} files")
    assert raw <= UNCOMPRESSED_LIMIT, sizes
    assert compressed <= COMPRESSED_LIMIT, sizes
    assert not [url for url in loaded if "jquery" in url or "xregexp" in url]  # the list has no action to run
