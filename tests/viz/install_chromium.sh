#!/usr/bin/env bash
# Install headless Chromium from Debian's packages for the browser tests (pytest -m browser).
# Idempotent and quick when a Chromium binary is already present. Needs root (or sudo) and
# apt-get; on other systems it says so and exits 0, and the browser tests skip themselves.
set -euo pipefail
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$b" >/dev/null 2>&1; then
    echo "chromium: $(command -v "$b") already installed"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: apt-get not available; install Chromium by hand to run the browser tests" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "chromium: not root and no sudo; skipping the install" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "chromium: installed $(command -v chromium)"
