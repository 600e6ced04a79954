#!/usr/bin/env bash
# One-time set-up of a fresh Debian machine for developing and testing agentsynth:
# Debian's Chromium (browser plugin tests; Playwright drives it, nothing is downloaded),
# bubblewrap and Podman (the python plugin's per-episode sandboxes: namespaces or containers, no
# network) and the test runner (nox, with uv as its fast venv backend). Every test venv is made by nox.
set -euo pipefail
MISSING=""
command -v chromium >/dev/null 2>&1 || MISSING="$MISSING chromium"
command -v bwrap >/dev/null 2>&1 || MISSING="$MISSING bubblewrap"
# the python plugin's container backend: Podman with runc (crun refuses hosts with hybrid cgroups)
# and mmdebstrap, which builds its image from Debian's mirror (no registry)
command -v podman >/dev/null 2>&1 || MISSING="$MISSING podman"
command -v runc >/dev/null 2>&1 || MISSING="$MISSING runc"
command -v mmdebstrap >/dev/null 2>&1 || MISSING="$MISSING mmdebstrap"
if [ -n "$MISSING" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $MISSING
fi
python3 -m pip install -q --upgrade "nox>=2024.10" "uv>=0.4"
# llama-cpp-python (agentsynth-local's runtime) is source-only on PyPI: compile it once per machine and
# version into a wheelhouse that every nox venv installs from (UV_FIND_LINKS, set by .ci/run); uv alone
# was seen rebuilding it (6 min on 2 idle cores, ~1 h on a loaded machine) for each new venv
WHEELS="${AGENTSYNTH_WHEELHOUSE:-$HOME/.cache/agentsynth/wheels}"
mkdir -p "$WHEELS"
echo "building or reusing the llama-cpp-python wheel in $WHEELS (a few minutes the first time)"
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" python3 -m pip wheel -q --no-deps --find-links "$WHEELS" -w "$WHEELS" \
    "llama-cpp-python>=0.3.7"
# the container backend's image (~150 MB, ~35 s on an idle machine), built once per machine with the
# plugin's own command in a throwaway venv; without it the container tests skip and say why
IMAGE="agentsynth-python:bookworm"
if ! podman image exists "$IMAGE" 2>/dev/null; then
    echo "building the python world's container image $IMAGE from Debian's mirror"
    TMPVENV="$(mktemp -d)"
    if uv venv -q "$TMPVENV/venv" && uv pip install -q --python "$TMPVENV/venv/bin/python" -e . -e plugins/agentsynth-python \
        && "$TMPVENV/venv/bin/agentsynth" python build-image --tag "$IMAGE"; then
        echo "built $IMAGE"
    else
        echo "WARNING: could not build $IMAGE: the python plugin's container tests will be skipped" >&2
    fi
    rm -rf "$TMPVENV"
fi
echo "set-up done: run the tests with: nox -t tests"
