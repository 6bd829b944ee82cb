#!/usr/bin/env bash
# Headless Chromium for the report's browser test (tests/test_report.py): Debian packages
# `chromium` and `chromium-driver` (/usr/bin/chromium, /usr/bin/chromedriver).
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
