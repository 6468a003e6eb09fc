"""Root-cause localisation from general signals (framework-free: no Django imports).

Signals are computed per service against a baseline window (metrics, log templates, Kubernetes
events, alerts, changes); a dependency graph is built from the evidence itself; the localiser walks
it and ranks candidates. Every score, edge and candidate keeps the ids of the records it came from.
"""
