"""How often one offline diagnosis runs the localiser, and what that costs, with the analyser's memo of
localisations (``diagnosis.llm.offline.localised.LocalisationMemo``) and without it (every request
localises, as before the memo).

Each demo scenario's default English question runs through the framework-free pipeline of
``tests/offline/pipeline.py`` (the real graph, tools and Gatekeeper; no database), memo off then on, for
``--repeat`` runs each. Prints localiser runs per diagnosis, the median wall clock and CPU time per run,
and the median CPU time inside the localiser and inside the memo's key. On a shared machine the CPU
times are the steadier figures.

    .venv/bin/python bench/offline_localiser.py                                   # every demo scenario, 9 runs each
    .venv/bin/python bench/offline_localiser.py --repeat 15 payment-db-pool-exhaustion
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import diagnosis.llm.offline.localised as localised  # noqa: E402
from diagnosis.demo.loader import load_scenario_meta, scenario_dir, shipped_scenarios  # noqa: E402
from tests.offline.pipeline import run_question  # noqa: E402  (bench and test code only)

REAL_LOCALISE = localised.localise
REAL_MEMO = localised.LocalisationMemo.localise
REAL_KEY = localised.LocalisationMemo.key
spent = {"runs": 0, "localiser": 0.0, "key": 0.0}


def _timed(name, function):
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - started
            spent["runs"] += name == "localiser"
    return wrapper


def _without_memo(self, results, subject):
    return localised.localise(localised.successful(results), subject)


def measure(name: str, memo: bool, repeat: int) -> dict:
    localised.LocalisationMemo.localise = REAL_MEMO if memo else _without_memo
    question = load_scenario_meta(scenario_dir(name))["default_question"]["en"]
    run_question(scenario_dir(name), question)  # warm-up
    wall, cpu, localiser, key, runs = [], [], [], [], []
    for _ in range(repeat):
        spent.update(runs=0, localiser=0.0, key=0.0)
        started, started_cpu = time.perf_counter(), time.process_time()
        run_question(scenario_dir(name), question)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        localiser.append(spent["localiser"])
        key.append(spent["key"])
        runs.append(spent["runs"])
    ms = lambda values: round(statistics.median(values) * 1000, 1)  # noqa: E731
    return {"runs": max(runs), "wall": ms(wall), "cpu": ms(cpu), "localiser": ms(localiser), "key": ms(key)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="demo scenario names (default: all)")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    localised.localise = _timed("localiser", REAL_LOCALISE)
    localised.LocalisationMemo.key = staticmethod(_timed("key", REAL_KEY))
    print("scenario | memo | localiser runs | wall ms | CPU ms | localiser CPU ms | key CPU ms (medians)")
    for name in args.scenarios or [d.name for d in shipped_scenarios()]:
        for memo in (False, True):
            r = measure(name, memo, args.repeat)
            print(f"{name} | {'on' if memo else 'off'} | {r['runs']} | {r['wall']} | {r['cpu']} | {r['localiser']} | "
                  f"{r['key']}", flush=True)


if __name__ == "__main__":
    main()
