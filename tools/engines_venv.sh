#!/usr/bin/env bash
# Build a venv that imports the REAL vLLM v1 BlockPool and the REAL SGLang
# MultiModalStaticCache and RadixCache on a CPU-only machine, with cacheproof installed
# editable, for model_tests/engines and the block-pool bench.
#                              usage: bash tools/engines_venv.sh VENV [BASE_VENV]
#
# BASE_VENV: a venv of this project (the README's .venv) whose installed packages VENV reuses
# through a .pth line, so that the same torch and triton (1.9 GB) are not installed twice;
# only what BASE_VENV lacks or pins differently goes into VENV. CI builds it so (its disk is
# small); without BASE_VENV, VENV stands alone.
#
# Rules: every version comes from constraints/engines.txt (exact pins).
#  1. torch 2.13.0 with its own dependencies (the CPU wheel; vllm 0.34.0 asks
#     for torch 2.14.0, whose wheel is the CUDA build with nvidia-* packages).
#  2. vllm, sglang and the packages their import chains touch, all --no-deps:
#     vllm's declared dependencies (CUDA kernels, servers) are never imported
#     by vllm.v1.core.block_pool, and vllm._C is not used; sglang's package
#     __init__ chain imports orjson, triton, starlette and IPython (traitlets)
#     before sglang.srt.mem_cache.multimodal_cache, which needs no GPU;
#     sglang.srt.mem_cache.radix_cache reaches sglang.srt.configs, which needs
#     six more (sentencepiece, dill, gguf, compressed-tensors, loguru,
#     charset-normalizer) and torchvision (next rule).
#  2b. torchvision: torch 2.13.0 has no torchvision in the registry that imports
#     beside it, so tools/torchvision_standin.py goes into VENV's site-packages
#     with a .pth line that installs it: it answers `import torchvision...` only
#     (never importlib.util.find_spec, so transformers' is_torchvision_available()
#     stays False), and any use of a name it hands out raises. Never in the product.
#  3. cacheproof itself, editable and --no-deps, plus its checker's own
#     dependencies (hypothesis, z3-solver, pytest, rich).
#  4. Smoke imports of the BlockPool, the MultiModalStaticCache and the RadixCache
#     (5-20 s each: vllm.config pulls transformers, sglang's utils pull torch and PIL).
# Warm pip cache: about 3 minutes and 3.1 GB (triton alone is 286 MB).
set -euo pipefail
VENV=${1:?usage: tools/engines_venv.sh VENV}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PINS="$ROOT/constraints/engines.txt"
PY=${PYTHON:-python3}
if [ -n "${2:-}" ]; then
    PYTHON=$PY bash "$ROOT/tools/venv_on_base.sh" "$VENV" "$2"
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
VENV=$(cd "$VENV" && pwd)  # absolute: the smoke imports below run from inside it
PIP=("$VENV/bin/python" -m pip install -q -c "$PINS")
"${PIP[@]}" torch
"${PIP[@]}" --no-deps -r "$PINS"
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp "$ROOT/tools/torchvision_standin.py" "$SITE/torchvision_standin.py"
echo "import torchvision_standin; torchvision_standin.install()" > "$SITE/torchvision_standin.pth"
"${PIP[@]}" hypothesis z3-solver pytest rich
"${PIP[@]}" --no-deps -e "$ROOT"
cd "$VENV" && "$VENV/bin/python" -W ignore -c "
import vllm
from vllm.v1.core.block_pool import BlockPool
import cacheproof
print('vllm', vllm.__version__, 'BlockPool OK; cacheproof', cacheproof.__version__)"
"$VENV/bin/python" -W ignore -c "
import sglang
from sglang.srt.mem_cache.multimodal_cache import EmbeddingResult, MultiModalStaticCache
print('sglang', sglang.__version__, 'MultiModalStaticCache OK')"
"$VENV/bin/python" -W ignore -c "
from sglang.srt.mem_cache.radix_cache import RadixCache
from transformers.utils.import_utils import is_torchvision_available
assert not is_torchvision_available(), 'transformers sees a torchvision: the stand-in is for imports only'
print('sglang RadixCache OK (torchvision: the stand-in)')"
"$VENV/bin/python" -W ignore -c "
from sglang.srt.managers.schedule_batch import Req
print('sglang Req OK')"
