"""The browser tests fail loudly, never skip, when Debian's chromium is missing."""

from __future__ import annotations

import pytest

from tests.console import test_browser


def test_a_missing_chromium_fails_with_the_install_command(monkeypatch):
    monkeypatch.setattr(test_browser, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install chromium"):
        test_browser.require_chromium()


def test_the_browser_is_launched_from_its_explicit_path_with_the_offline_flags():
    assert test_browser.CHROMIUM == "/usr/bin/chromium"
    assert {"--headless", "--no-sandbox", "--disable-background-networking", "--disable-component-update"} <= set(
        test_browser.CHROMIUM_ARGS)
