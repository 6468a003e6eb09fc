"""The bounded state-graph engine, the diagnosis topology and the orchestration trace (stdlib only)."""
