"""The cyclic collector is held off while a localisation runs, and left as the caller had it."""

import gc

import pytest

from diagnosis.localisation import outcome
from diagnosis.localisation.collector import collector_paused


@pytest.fixture
def collector_on():
    was_on = gc.isenabled()
    gc.enable()
    yield
    if not was_on:
        gc.disable()


def test_localise_runs_with_the_collector_off_and_turns_it_back_on(collector_on, monkeypatch):
    seen = []
    read = outcome.read_evidence
    monkeypatch.setattr(outcome, "read_evidence", lambda results: seen.append(gc.isenabled()) or read(results))
    outcome.localise([], ["checkout"])
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_the_caller_keeps_off_stays_off(collector_on):
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_collector_is_back_on_after_a_failure(collector_on):
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
