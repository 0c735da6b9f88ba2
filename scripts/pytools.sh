#!/usr/bin/env bash
# The Python tools the tests drive, from PyPI, in one venv of their own
# (/usr/local/lib/joblet-pytools, or $JOBLET_PYTOOLS): NVIDIA's NVML binding
# and gpustat (real NVML clients against the fake libnvidia-ml.so),
# schemathesis (tests the REST API against its OpenAPI document),
# Playwright (drives Debian's chromium through the web console) and
# jsonschema (checks `joblet cdi generate` against the CDI spec's schema).
# Built on the system's /usr/bin/python3 (Debian's), not whatever python3
# comes first on PATH, so a job that sees the host's /usr runs the same
# tools (the NVML clients inside a GPU job). Installs what is missing; does
# nothing when the versions are there.
# Prints nothing but errors. Called by setup.sh.
set -euo pipefail
venv="${JOBLET_PYTOOLS:-/usr/local/lib/joblet-pytools}"
# Pinned: a test that passes today must not break on a release tomorrow.
pkgs=(nvidia-ml-py==13.615.71 gpustat==1.1.1 schemathesis==4.32.5 playwright==1.65.2 jsonschema==4.26.0)
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if [ -x "$venv/bin/python" ] && ! grep -q "^home = $(dirname "$py")\$" "$venv/pyvenv.cfg" 2>/dev/null; then
    echo "pytools.sh: $venv was made by another python than $py: making it again"
    $SUDO rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "pytools.sh: creating $venv (test tools from PyPI: ${pkgs[*]})"
    $SUDO "$py" -m venv "$venv"
fi
frozen=$("$venv/bin/python" -m pip freeze --disable-pip-version-check 2>/dev/null | tr 'A-Z_' 'a-z-')
missing=()
for p in "${pkgs[@]}"; do
    grep -qxF "$p" <<<"$frozen" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "pytools.sh: installing ${missing[*]} into $venv"
    $SUDO "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi
