def test_the_demo_backend_serves_kubernetes_json_shifted_to_now(tmp_path):
    shipped = Path(__file__).resolve().parents[2] / "diagnosis" / "demo" / "scenarios"
    with_k8s = [p for p in shipped.iterdir() if (p / "kubernetes.json").is_file()]
    assert len(with_k8s) >= 3
    demo = DemoBackend(with_k8s, now=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc))
    world = json.loads((with_k8s[0] / "kubernetes.json").read_text())
    pod = world["pods"][0]
    result = demo.query_kubernetes(namespace=world["namespace"], kind="pod", name=pod["name"])
    assert [p["name"] for p in result["pods"]] == [pod["name"]]
    assert all(e["lastTimestamp"].startswith("2026-11-30T") for e in result["events"])
    assert not any(k.endswith("_offset_seconds") for e in result["events"] for k in e)
    with pytest.raises(BackendError, match="^kind:"):
        demo.query_kubernetes(kind="secret", name="x")
