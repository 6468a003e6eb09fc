"""A StatefulSet's volume: its kubelet series, labelled by namespace and claim only, localise to it."""

from diagnosis.localisation.outcome import localise
from tests.localisation.support import Results, stepped


def _database_whose_volume_fills(claim: str) -> Results:
    """ledger-api's inserts fail from minute 44; the free bytes of the volume ``claim`` ran out at minute 40. The
    kubelet labels a volume's series by namespace and claim only."""
    results = Results()
    results.logs("orders-db", [(-3000 + i * 120, "", f"checkpoint complete: wrote {40 + i} buffers") for i in range(24)])
    results.logs("ledger-api", [(-3000 + i * 120, "", f"POST /v1/entries 201 in {30 + i} ms") for i in range(20)]
                 + [(-(60 - 44) * 60 + 30 + i * 50, "ERROR", f"insert into entries failed: orders-db:5432 returned an error")
                    for i in range(8)])
    results.metric({"__name__": "http_server_errors_ratio", "service": "ledger-api"}, stepped(0.001, 0.3, 44))
    volume = {"namespace": "shop", "persistentvolumeclaim": claim}
    results.metric({"__name__": "kubelet_volume_stats_available_bytes", **volume}, stepped(6e9, 1e6, 40))
    results.metric({"__name__": "kubelet_volume_stats_capacity_bytes", **volume}, [2e10] * 60)
    return results


def test_a_statefulset_whose_volume_filled_is_the_root_by_its_claims_name():
    found = localise(_database_whose_volume_fills("data-orders-db-0").items, ["ledger-api"])
    assert (found.outcome, found.root, found.kind) == ("root_cause", "orders-db", "resource.disk")
    assert [s.kind for s in found.top().faults] == ["disk"]
    # The claim of another StatefulSet whose name begins with the database's is not the database's volume.
    found = localise(_database_whose_volume_fills("data-orders-db-archive-0").items, ["ledger-api"])
    assert "orders-db" not in [c.service for c in found.candidates if c.faults]
