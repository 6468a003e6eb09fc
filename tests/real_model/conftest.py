"""The real local model server for the `real_model` suite: started once per session.

The suite runs only when AIOPS_REAL_MODEL=1 (`make test-real-model`); otherwise it is skipped. When
it is asked for, a server that cannot be built or started FAILS the suite: it is never skipped.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.real_model import RealModelUnavailable, llama_server

ENABLED = os.environ.get("AIOPS_REAL_MODEL") == "1"


def pytest_collection_modifyitems(config, items):
    if ENABLED:
        return
    skip = pytest.mark.skip(reason="real model server suite: run `make test-real-model` (AIOPS_REAL_MODEL=1)")
    for item in items:
        if "real_model" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def real_model_server(tmp_path_factory):
    log = Path(tmp_path_factory.mktemp("real-model")) / "llama-server.log"
    try:
        with llama_server(log_path=log) as base_url:
            yield base_url
    except RealModelUnavailable as exc:
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        pytest.fail(f"the real model server is unavailable: {exc}\n{tail}", pytrace=False)
