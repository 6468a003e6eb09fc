"""``python -m diagnosis.evaluation.generator OUTDIR --seeds 0:50 [--traces on|off]``: write generated
incidents as scenario folders ``OUTDIR/gen-<seed>``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnosis.evaluation.generator import HELD_BACK_FROM, generate, write_incident


def _seeds(text: str) -> range:
    start, sep, stop = text.partition(":")
    try:
        return range(int(start), int(stop)) if sep else range(int(start), int(start) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP (e.g. 0:50) or one seed, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m diagnosis.evaluation.generator", description=__doc__)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--seeds", type=_seeds, default=range(0, 50), help="START:STOP (stop excluded), default 0:50")
    parser.add_argument("--traces", choices=("on", "off"), help="force traces.json on or off (default: the seed decides)")
    args = parser.parse_args(argv)
    traces = None if args.traces is None else args.traces == "on"
    held = [s for s in args.seeds if s >= HELD_BACK_FROM]
    for seed in args.seeds:
        incident = generate(seed, traces=traces)
        write_incident(incident, args.outdir / incident.name)
    print(f"wrote {len(args.seeds)} incidents to {args.outdir}"
          + (f" ({len(held)} held back: score them, do not read them)" if held else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
