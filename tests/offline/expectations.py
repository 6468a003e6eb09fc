"""What the offline analyser is expected to answer on the shipped scenarios (test code only)."""

# Scenarios whose evidence, as the analyser gathers it within its budget, does not separate the cause: an
# honest "undetermined" is the right answer there, and a confident wrong root the wrong one. Each is
# explained in docs/EVALUATION.md; the list may only shrink.
UNDETERMINED = {
    "invoice-renderer-slow-flag",  # a flag change and worker kills fit equally well
    "settlement-replication-lag-zh",  # the replica's lag is told in the caller's words; no record names the database
    "shipping-misleading-errors",  # the breaking change is on a dependency that itself shows nothing
}
