"""The diagnosis on a REAL local model: planner schema-valid rate per structured-output level, runs
reaching the executor, tool round trips, and run latency (median, p95).

Starts llama-cpp-python's server with Gemma 3 270M (tests/support/real_model.py; the cached venv is
built on first use by scripts/real_model_env.sh) and runs `manage.py eval_scenarios` against it once
per `--levels` value, on a fresh SQLite database each, over `--scenarios` (names of shipped demo
scenarios) in `--lang`. Prints each level's summary and writes the reports to `--out/<level>/`.

    .venv/bin/python bench/real_model.py --levels json_object_schema json_object --scenarios \
        payment-db-pool-exhaustion redis-cache-eviction --lang both
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.real_model import MODEL_ALIAS, llama_server  # noqa: E402

SCENARIOS = REPO / "diagnosis" / "demo" / "scenarios"
MAX_TOKENS = {"PLANNER": 384, "EXECUTOR": 512, "VERIFIER": 384, "COMPOSER": 512, "SIMPLE": 128, "AIOPS": 512}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", nargs="+", default=["json_object_schema", "json_object"],
                        choices=["json_schema", "json_object_schema", "json_object", "prompt"])
    parser.add_argument("--scenarios", nargs="+", default=["payment-db-pool-exhaustion"])
    parser.add_argument("--lang", choices=("en", "zh", "both"), default="both")
    parser.add_argument("--max-seconds", type=int, default=150, help="DIAGNOSIS_MAX_SECONDS")
    parser.add_argument("--out", type=Path, default=REPO / "var" / "eval-real-model")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="real-model-") as tmp:
        subset = Path(tmp) / "scenarios"
        subset.mkdir()
        for name in args.scenarios:
            (subset / name).symlink_to(SCENARIOS / name)
        with llama_server(log_path=Path(tmp) / "server.log") as base_url:
            results = {}
            for level in args.levels:
                env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings",
                       "LOG_LEVEL": "WARNING", "DATABASE_URL": f"sqlite:///{tmp}/{level}.sqlite3", "REDIS_URL": "",
                       "LLM_PROVIDER": "openai", "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "x",
                       "OPENAI_MODEL": MODEL_ALIAS, "LLM_STRUCTURED_OUTPUT": level, "LLM_READ_TIMEOUT": "120",
                       "LLM_MAX_RETRIES": "1", "DIAGNOSIS_MAX_SECONDS": str(args.max_seconds),
                       "DIAGNOSIS_MAX_TOOL_CALLS": "3",
                       **{f"LLM_MAX_TOKENS_{role}": str(n) for role, n in MAX_TOKENS.items()}}
                for name in [k for k in env if k.startswith("OPENAI_MODEL_")]:
                    env.pop(name)
                python = str(REPO / ".venv" / "bin" / "python")
                subprocess.run([python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True)
                out = args.out / level
                done = subprocess.run([python, "manage.py", "eval_scenarios", "--scenarios", str(subset),
                                       "--lang", args.lang, "--out", str(out)], cwd=REPO, env=env)
                report = json.loads((out / "evaluation.json").read_text())
                results[level] = report["summary"]
                print(f"\n== {level} (exit {done.returncode}) ==")
                print(json.dumps(report["summary"], indent=2))
    print("\nlevel | runs | planner schema-valid | reaching executor | tool round trips | fallback | median ms | p95 ms")
    for level, s in results.items():
        print(f"{level} | {s['runs']} | {s['planner_schema_valid_rate']:.0%} | {s['runs_reaching_executor']} | "
              f"{s['tool_round_trips']} | {s['fallback_rate']:.0%} | {s['median_latency_ms']} | {s['p95_latency_ms']}")


if __name__ == "__main__":
    main()
