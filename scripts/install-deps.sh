#!/usr/bin/env bash
# Installs the Debian 12 packages rewind needs to build, test and serve. Idempotent.
# chromium (headless) runs the browser test of the built-in web page (tests/e2e/webui.test.js); redis-server and
# haproxy run the remote cache tier's tests and deploy/try-replicas.sh; openssl (the command) makes the
# certificates of its TLS tests (libssl-dev is what the client links).
# libvulkan-dev, glslc and mesa-vulkan-drivers (lavapipe, a CPU Vulkan device) build and test the GPU backend (docs/gpu.md).
# libstb-dev (stb_image) decodes PNG and JPEG images (vision/image_decode.cc).
set -euo pipefail
PKGS=(g++ cmake ninja-build pkg-config git libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      libcpp-httplib-dev libpcre2-dev libhiredis-dev libssl-dev openssl libstb-dev redis-server haproxy curl python3 clang chromium
      libvulkan-dev glslc mesa-vulkan-drivers)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the end-to-end tests. A machine may already have them from another source (a nodejs
# package that bundles npm conflicts with Debian's npm package), so only commands that are missing are installed.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
else
  echo "all Debian packages present"
fi
