#!/usr/bin/env bash
# Installs what kvscope's build and tests need, only when missing or at the wrong version.
# Idempotent; safe to run on every `make serve` / `make test`. Pins and why: docs/web-build.md.
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.129
log() { printf '[install-tools] %s\n' "$*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

# Rust wasm target.
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# Debian packages: headless Chromium + driver (browser tests), libzmq (capture).
need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
dpkg -s libzmq3-dev >/dev/null 2>&1 || need_apt+=(libzmq3-dev)
dpkg -s pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Python deps of the ZMQ capture tests' publisher peer (tests/zmq/publisher.py): pyzmq, msgspec.
PYTHON=${KVSCOPE_PYTHON:-python3}
if ! "$PYTHON" -c 'import zmq, msgspec' >/dev/null 2>&1; then
  log "pip install pyzmq msgspec"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore pyzmq msgspec
fi

# wasm-bindgen CLI pinned to the lockfile's wasm-bindgen version.
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
  log "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --locked
fi

# wasm-pack (builds and tests the npm package).
if ! command -v wasm-pack >/dev/null; then
  log "cargo install wasm-pack"
  cargo install wasm-pack --version 0.15.1 --locked
fi

# npm packages, each only when node_modules is missing or older than its lockfile:
#  - tests/node: binaryen 132 (wasm-opt for the npm package; never Debian's binaryen, whose
#    wasm-opt 108 breaks wasm-bindgen output; scripts/test.sh puts it first on PATH), typescript;
#  - tests/e2e: playwright-core (driving Debian's chromium) and binaryen 132 for the web build.
for dir in tests/node tests/e2e; do
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    log "npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done


log "tools ready"
