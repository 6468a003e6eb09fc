"""The diagnosis on a REAL local model: strict scores from the structured diagnosis, planner schema-valid
rate, runs reaching the executor, tool round trips and run latency (median, p95), per structured-output
level and with the `rank_root_causes` hint on and off, side by side.

Starts llama-cpp-python's server with Gemma 3 270M (tests/support/real_model.py; the cached venv is
built on first use by scripts/real_model_env.sh) and runs `manage.py eval_scenarios` against it once
per `--levels` value and `--hints` value (LLM_RANKING_HINT), on a fresh SQLite database each, over
`--scenarios` (names of shipped demo scenarios) in `--lang`. Prints each summary and the side-by-side
table, and writes the reports to `--out/<level>/hint-<on|off>/`.

    .venv/bin/python bench/real_model.py --levels json_object_schema --hints on off --scenarios \
        payment-db-pool-exhaustion redis-cache-eviction --lang en
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

from diagnosis.evaluation.compare import side_by_side  # noqa: E402
from tests.support.real_model import MODEL_ALIAS, llama_server  # noqa: E402

SCENARIOS = REPO / "diagnosis" / "demo" / "scenarios"
MAX_TOKENS = {"PLANNER": 384, "EXECUTOR": 512, "VERIFIER": 384, "COMPOSER": 512, "SIMPLE": 128, "AIOPS": 512}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", nargs="+", default=["json_object_schema", "json_object"],
                        choices=["json_schema", "json_object_schema", "json_object", "prompt"])
    parser.add_argument("--hints", nargs="+", default=["on", "off"], choices=["on", "off"],
                        help="LLM_RANKING_HINT values to run: the rank_root_causes tool offered or not")
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
                for hint in args.hints:
                    label = f"{level}, hint {hint}"
                    results[label] = evaluate(args, level, hint, base_url, Path(tmp))
                    print(f"\n== {label} ==")
                    print(json.dumps(results[label], indent=2))
    print()
    print(side_by_side(results))


def evaluate(args, level: str, hint: str, base_url: str, tmp: Path) -> dict:
    """One `eval_scenarios` run against the server, on a fresh database; its summary."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings",
           "LOG_LEVEL": "WARNING", "DATABASE_URL": f"sqlite:///{tmp}/{level}-{hint}.sqlite3", "REDIS_URL": "",
           "LLM_PROVIDER": "openai", "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "x",
           "OPENAI_MODEL": MODEL_ALIAS, "LLM_STRUCTURED_OUTPUT": level, "LLM_READ_TIMEOUT": "120",
           "LLM_MAX_RETRIES": "1", "DIAGNOSIS_MAX_SECONDS": str(args.max_seconds),
           "DIAGNOSIS_MAX_TOOL_CALLS": "3", "LLM_RANKING_HINT": "true" if hint == "on" else "false",
           **{f"LLM_MAX_TOKENS_{role}": str(n) for role, n in MAX_TOKENS.items()}}
    for name in [k for k in env if k.startswith("OPENAI_MODEL_")]:
        env.pop(name)
    python = str(REPO / ".venv" / "bin" / "python")
    subprocess.run([python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True)
    out = args.out / level / f"hint-{hint}"
    done = subprocess.run([python, "manage.py", "eval_scenarios", "--scenarios", str(tmp / "scenarios"),
                           "--lang", args.lang, "--out", str(out)], cwd=REPO, env=env)
    if done.returncode:
        print(f"eval_scenarios exited {done.returncode} ({level}, hint {hint})")
    return json.loads((out / "evaluation.json").read_text())["summary"]

if __name__ == "__main__":
    main()
