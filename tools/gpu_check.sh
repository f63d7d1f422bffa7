#!/usr/bin/env bash
# The prepared device check, for a session lent a CUDA machine (one call, well under 10 minutes):
#   run(command="bash tools/gpu_check.sh", timeout_s=540)
# That machine has its own torch and Triton and reaches no registry, so the project is installed
# without dependencies. Logs go to $OUT when it is set (the device tool fetches them back).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/gpu-check}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 2
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA here'; print(torch.__version__, torch.cuda.get_device_name())" || exit 2
status=0
python3 -m pytest -q -p no:cacheprovider gpu_tests 2>&1 | tee "$out/gpu_tests.log" || status=1
cacheproof check --examples 200 --json "$out/check_cuda.json" 2>&1 | tee "$out/check_cuda.log" || status=1
cacheproof check --threads 4 --examples 100 --json "$out/check_threads_cuda.json" 2>&1 | tee "$out/check_threads_cuda.log" || status=1
cacheproof bench blocks --json "$out/bench_blocks.json" 2>&1 | tee "$out/bench_blocks.log" || status=1
cacheproof bench monitor --device cuda --json "$out/bench_monitor.json" 2>&1 | tee "$out/bench_monitor.log" || status=1
exit $status
