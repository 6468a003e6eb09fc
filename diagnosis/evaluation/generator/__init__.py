"""Generated incidents for evaluation: random call graphs, one fault of a random kind propagated along
its edges, noise, and telemetry in the real formats and naming conventions of many stacks, written as
demo scenario folders (diagnosis/demo/README.md). No Django imports.

Seeds at or above ``HELD_BACK_FROM`` are held back: tests only check that they generate and load;
nobody looks at their output while developing the localiser.
"""

from diagnosis.evaluation.generator.incident import HELD_BACK_FROM, QUESTION_KINDS, Incident, generate, write_incident

__all__ = ["HELD_BACK_FROM", "QUESTION_KINDS", "Incident", "generate", "write_incident"]
