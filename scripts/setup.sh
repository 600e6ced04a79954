#!/usr/bin/env bash
# One-time set-up of a fresh Debian machine for developing and testing agentsynth:
# Debian's Chromium (browser plugin tests; Playwright drives it, nothing is downloaded),
# bubblewrap (the python plugin's per-episode sandbox: namespaces, no network) and the test
# runner (nox, with uv as its fast venv backend). Every test venv is made by nox.
set -euo pipefail
MISSING=""
command -v chromium >/dev/null 2>&1 || MISSING="$MISSING chromium"
command -v bwrap >/dev/null 2>&1 || MISSING="$MISSING bubblewrap"
if [ -n "$MISSING" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $MISSING
fi
python3 -m pip install -q --upgrade "nox>=2024.10" "uv>=0.4"
echo "set-up done: run the tests with: nox -t tests"
