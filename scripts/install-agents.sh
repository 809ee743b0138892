#!/usr/bin/env bash
# Installs the real provisioning agents that the end-to-end tests drive, unmodified:
#   - cloud-init 22.4.2 (Debian 12 package; its Python modules live in /usr/lib/python3/dist-packages)
#   - afterburn 5.11.0 (built from crates.io with its own Cargo.lock into target/agents/afterburn)
#   - WALinuxAgent 2.7.3.0 (Debian 12), 2.12.0.2 (Debian 13) and 2.16.0.2 (Debian unstable),
#     cloud-init 25.1.4 (Debian 13) and 26.2 (Debian unstable): downloaded and unpacked, never
#     installed (waagent's postinst starts the service), into target/agents/<name>-<version>/ by
#     scripts/debian-package.sh
# Run as root on a fresh Debian 12 machine. Idempotent: what is already there is kept.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AFTERBURN_VERSION="5.11.0"
AFTERBURN_ROOT="${REPO}/target/agents/afterburn"
# A stable target dir so an interrupted build resumes instead of starting over.
AFTERBURN_BUILD="${REPO}/target/agents/afterburn-build"

log() { printf 'install-agents: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root (apt-get install)"
    exit 2
fi

# --- cloud-init -------------------------------------------------------------------------------
# Only the Python package is used (the tests call its functions); its systemd units are never
# started by the tests. policy-rc.d keeps the package's postinst from starting anything here.
if dpkg-query -W -f='${Status}' cloud-init 2>/dev/null | grep -q '^install ok installed$'; then
    log "cloud-init $(dpkg-query -W -f='${Version}' cloud-init) already installed"
else
    log "installing cloud-init"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends cloud-init
fi
# The tests also need util-linux (unshare, setpriv) and iproute2 (ip) for network namespaces.
missing=()
command -v unshare >/dev/null || missing+=(util-linux)
command -v ip >/dev/null || missing+=(iproute2)
# WALinuxAgent's run-time needs (docs/protocol.md §9.1): python3-distro, openssl (its transport
# certificate), ssh-keygen.
/usr/bin/python3 -c 'import distro' >/dev/null 2>&1 || missing+=(python3-distro)
command -v openssl >/dev/null || missing+=(openssl)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
/usr/bin/python3 -c 'import cloudinit.version as v; print("install-agents: cloud-init python package", v.version_string())' >&2

# --- unpacked Debian packages ------------------------------------------------------------------
bash "${REPO}/scripts/debian-package.sh" bookworm waagent 2.7.3.0 "${REPO}/target/agents/walinuxagent-2.7.3"
bash "${REPO}/scripts/debian-package.sh" trixie waagent 2.12.0.2 "${REPO}/target/agents/walinuxagent-2.12"
bash "${REPO}/scripts/debian-package.sh" trixie cloud-init 25.1.4 "${REPO}/target/agents/cloud-init-25.1.4"
# Both arch: all. 2.16.0.2 depends on python3-crypt-r (not in Debian 12); Debian 12's Python
# 3.11 still has the crypt module it tries first (common/osutil/default.py:64-71).
bash "${REPO}/scripts/debian-package.sh" unstable waagent 2.16.0.2 "${REPO}/target/agents/walinuxagent-2.16"
bash "${REPO}/scripts/debian-package.sh" unstable cloud-init 26.2 "${REPO}/target/agents/cloud-init-26.2"

# --- afterburn --------------------------------------------------------------------------------
afterburn_bin="${AFTERBURN_ROOT}/bin/afterburn"
if [ -x "${afterburn_bin}" ] && "${afterburn_bin}" --version 2>/dev/null | grep -q "${AFTERBURN_VERSION}"; then
    log "afterburn ${AFTERBURN_VERSION} already built at ${afterburn_bin}"
else
    log "building afterburn ${AFTERBURN_VERSION} (several minutes) into ${AFTERBURN_ROOT}"
    # afterburn links OpenSSL through openssl-sys.
    build_missing=()
    for pkg in libssl-dev pkg-config gcc; do
        dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q '^install ok installed$' \
            || build_missing+=("${pkg}")
    done
    if [ "${#build_missing[@]}" -gt 0 ]; then
        log "installing build dependencies ${build_missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends "${build_missing[@]}"
    fi
    command -v cargo >/dev/null || { log "cargo not found: install a Rust toolchain first"; exit 1; }
    CARGO_TARGET_DIR="${AFTERBURN_BUILD}" nice -n 10 cargo install afterburn \
        --version "${AFTERBURN_VERSION}" --locked --root "${AFTERBURN_ROOT}"
    "${afterburn_bin}" --version >&2
fi
log "done"
