#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh Debian
# machine (root), then runs fmt, clippy and every test with snapshots in check mode.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "system packages"
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
/usr/bin/python3 -c 'import cloudinit' >/dev/null 2>&1 || missing+=(cloud-init)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# The release files (scripts/release.sh, tests release and ci_action): readelf, dpkg-deb, curl.
command -v readelf >/dev/null 2>&1 || missing+=(binutils)
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# Agent time: libfaketime preloaded into agents whose clock runs faster (fake_wireserver::clock).
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing+=(libfaketime)
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

step "cargo-insta"
command -v cargo-insta >/dev/null 2>&1 || cargo install cargo-insta --locked

step "real agents"
bash scripts/install-agents.sh

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

step "binaries the end-to-end tests run"
cargo build --workspace --bins
# Agent time's second preload, beside the binaries (fake_wireserver::clock::agent_clock_library).
cargo build -p wirecheck-agent-clock

step "tests (snapshots in check mode)"
INSTA_UPDATE=no cargo insta test --workspace --check --unreferenced=reject
