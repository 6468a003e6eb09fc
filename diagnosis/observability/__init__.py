"""Metrics, structured logs and traces: the service observable like the systems it diagnoses.

Instrumentation lives here; the rest of the code calls one hook per event (a run moved, a model
call finished, a tool call finished, a stream opened or closed)."""
