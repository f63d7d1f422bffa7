#!/usr/bin/env bash
# Make VENV (if it is not there) reuse BASE_VENV's installed packages through one .pth line in its
# site-packages, so that what BASE_VENV holds (torch, triton: 1.9 GB) is not installed twice; pip
# then installs into VENV only what BASE_VENV lacks or pins differently, and VENV's own packages
# come first on sys.path. Used for the engines venv (tools/engines_venv.sh) and CI's fuzz venv.
#                              usage: bash tools/venv_on_base.sh VENV BASE_VENV
set -euo pipefail
VENV=${1:?usage: tools/venv_on_base.sh VENV BASE_VENV}
BASE=${2:?usage: tools/venv_on_base.sh VENV BASE_VENV}
[ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
purelib() { "$1/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
purelib "$BASE" > "$(purelib "$VENV")/cacheproof_base_venv.pth"
