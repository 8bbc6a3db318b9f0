#!/usr/bin/env bash
# Build the two peer virtual environments of benchmarks/bench_lm.py (idempotent: a venv
# whose check passes is left as it is).
#
#   bash benchmarks/peers/setup_lm_peers.sh            # both
#   bash benchmarks/peers/setup_lm_peers.sh llamacpp   # or: hf
#
# benchmarks/.peer-venv-llamacpp: llama-cpp-python, which compiles llama.cpp from source
#   with cmake (no binary wheel on PyPI); built for this CPU (GGML_NATIVE=ON), under
#   `nice`, on CMAKE_BUILD_PARALLEL_LEVEL cores (default 2): 10-20 min on 2 cores.
# benchmarks/.peer-venv-hf: torch 2.13.0 (CPU build), transformers, gguf, accelerate, numpy.
#   transformers reads the GGUF file itself (`from_pretrained(dir, gguf_file=...)`) and
#   dequantizes it to float32.
#
# Both venvs are git-ignored (benchmarks/.peer-venv*/). Override the interpreter with
# PYTHON=..., the versions with LLAMACPP_SPEC / TORCH_SPEC / TRANSFORMERS_SPEC / GGUF_SPEC /
# ACCELERATE_SPEC.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"   # benchmarks/
PYTHON="${PYTHON:-python3.11}"
LLAMACPP_SPEC="${LLAMACPP_SPEC:-llama-cpp-python==0.3.36}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
TRANSFORMERS_SPEC="${TRANSFORMERS_SPEC:-transformers==5.25.0}"
GGUF_SPEC="${GGUF_SPEC:-gguf==0.19.0}"
ACCELERATE_SPEC="${ACCELERATE_SPEC:-accelerate==1.16.0}"  # transformers' GGUF load needs it
WHICH="${1:-all}"

# a peer runs as its users run it: not with our packages or our JAX settings
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV XLA_FLAGS

check() {  # check VENV CODE: does CODE run under the venv's python (from an empty folder)?
    local py="$1/bin/python" dir rc=0
    [ -x "$py" ] || return 1
    dir="$(mktemp -d)"   # `python -c` puts its folder first on sys.path: not the repository's
    (cd "$dir" && "$py" -c "$2") >/dev/null 2>&1 || rc=$?
    rmdir "$dir"
    return "$rc"
}

make_venv() {  # [NICE=...] make_venv VENV CHECK PIP-ARGS...
    local venv="$1" code="$2"
    shift 2
    if check "$venv" "$code"; then
        echo "$venv: ready"
        return 0
    fi
    echo "$venv: creating ($*)"
    "$PYTHON" -m venv --clear "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    ${NICE:-} "$venv/bin/python" -m pip install "$@"
    check "$venv" "$code" || { echo "$venv: created but its check fails: $code" >&2; return 1; }
    echo "$venv: ready"
}

LLAMA_CHECK="import llama_cpp, numpy; from importlib.metadata import version as v; \
assert v('llama-cpp-python') == '${LLAMACPP_SPEC#*==}'"
HF_CHECK="import torch, transformers, gguf, accelerate, numpy; \
assert torch.__version__.split('+')[0] == '${TORCH_SPEC#*==}'; \
assert transformers.__version__ == '${TRANSFORMERS_SPEC#*==}'"

if [ "$WHICH" = all ] || [ "$WHICH" = llamacpp ]; then
    # compiles llama.cpp (C/C++, cmake) for this CPU's instruction set
    # (under `nice`, so that the machine stays usable while it builds)
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
    NICE="nice -n 10" make_venv "$HERE/.peer-venv-llamacpp" "$LLAMA_CHECK" --no-cache-dir \
        --verbose "$LLAMACPP_SPEC" numpy
fi
if [ "$WHICH" = all ] || [ "$WHICH" = hf ]; then
    # torch 2.13.0 is the CPU wheel on this machine's disk (pip's find-links); naming the
    # exact version keeps pip from fetching a multi-GB CUDA build
    make_venv "$HERE/.peer-venv-hf" "$HF_CHECK" "$TORCH_SPEC" "$TRANSFORMERS_SPEC" \
        "$GGUF_SPEC" "$ACCELERATE_SPEC" numpy
fi
