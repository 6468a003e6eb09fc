"""Question focus (issue 26, item 6): when the root is on another service than the one asked about, the
root-cause claim says the asked service is affected because of the root, through the edge that links them,
and cites the record of that edge."""

from __future__ import annotations

from diagnosis.llm.offline.findings import RootCause, read_finding
from diagnosis.llm.offline.localised import localise_results, root_claim
from tests.localisation.support import caller_and_database


def test_the_root_claim_says_the_asked_service_is_affected_through_the_edge():
    results = caller_and_database()
    loc = localise_results(results.items, ["fobrel-api"])
    assert loc.root == "quastor-db" and [e.callee for e in loc.path] == ["quastor-db"]  # the localiser's decision
    finding, bindings = root_claim(loc)
    statement = finding.statement()
    assert "fobrel-api is affected because of quastor-db, through fobrel-api → quastor-db." in statement
    assert read_finding(statement) == finding and isinstance(finding, RootCause)
    # The edge is evidence: the asked service's own line that names the root is cited.
    edge_refs = {(r.invocation_id, r.raw_path) for r in loc.path[0].refs[:1]}
    assert edge_refs and edge_refs <= {(b["source_invocation_id"], b["raw_path"]) for b in bindings}
    assert any("postgres://quastor-db:5432" in b["evidence_excerpt"] for b in bindings)


def test_asked_about_the_root_itself_the_claim_names_no_path():
    results = caller_and_database()
    loc = localise_results(results.items, ["quastor-db"])
    assert loc.root == "quastor-db" and loc.path == []
    finding, _ = root_claim(loc)
    assert finding.asked == "" and "is affected because of" not in finding.statement()
