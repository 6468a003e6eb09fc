"""Evaluation of the diagnosis on the demo scenarios and the holdout set (docs/EVALUATION.md): it drives
runs through the normal execution path and scores them; it is not part of serving a request."""
