#!/usr/bin/env bash
# Installs the real provisioning agents that the end-to-end tests drive, unmodified, as their
# profiles' [install] tables say (conformance/agents/*.toml: the registry of real agents):
#   - from = "debian": a package of the machine's own suite, installed with apt-get (cloud-init
#     22.4.2: its Python modules live in /usr/lib/python3/dist-packages)
#   - from = "debian-unpacked": downloaded from the machine's own archive (suite swapped) and
#     unpacked, never installed (waagent's postinst starts the service), into
#     target/agents/<folder>/ by scripts/debian-package.sh
#   - from = "cargo": built from crates.io with its own Cargo.lock into target/agents/<folder>
#   - from = "workspace": built with the workspace (nothing to do here)
# Run as root on a fresh Debian 12 machine. Idempotent: what is already there is kept.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'install-agents: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root (apt-get install)"
    exit 2
fi

# The registry: one line per profile with an [install] table, "from package suite version
# folder" ("-" where a field does not apply). Python's tomllib (3.11, Debian 12) reads the
# profiles before anything of the workspace is built; a minimal Debian has no python3 yet.
if [ ! -x /usr/bin/python3 ]; then
    log "installing python3 (it reads the profiles)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends python3
fi
registry() {
    /usr/bin/python3 - "${REPO}/conformance/agents" <<'PY'
import pathlib, sys, tomllib
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.toml")):
    with open(path, "rb") as f:
        install = tomllib.load(f).get("install")
    if install:
        print(" ".join(install.get(k, "-") for k in ("from", "package", "suite", "version", "folder")))
PY
}
REGISTRY="$(registry)"
[ -n "${REGISTRY}" ] || { log "no [install] table in conformance/agents/*.toml"; exit 1; }

# --- from = "debian": packages of the machine's own suite ---------------------------------------
# Only the Python package of cloud-init is used (the tests call its functions); its systemd units
# are never started by the tests.
while read -r from package _ <&3; do
    [ "${from}" = debian ] || continue
    if dpkg-query -W -f='${Status}' "${package}" 2>/dev/null | grep -q '^install ok installed$'; then
        log "${package} $(dpkg-query -W -f='${Version}' "${package}") already installed"
    else
        log "installing ${package}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update
        apt-get install -y --no-install-recommends "${package}"
    fi
done 3<<< "${REGISTRY}"
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

# --- from = "debian-unpacked" -----------------------------------------------------------------
# WALinuxAgent 2.16.0.2 depends on python3-crypt-r (not in Debian 12); Debian 12's Python 3.11
# still has the crypt module it tries first (common/osutil/default.py:64-71). Two profiles of one
# package share its folder: it is unpacked once. The loops read the registry on descriptor 3, so
# apt-get and cargo cannot swallow it from stdin.
declare -A unpacked=()
while read -r from package suite version folder <&3; do
    [ "${from}" = debian-unpacked ] || continue
    line="${suite} ${package} ${version}"
    if [ -n "${unpacked[${folder}]:-}" ]; then
        # One folder, one package: profiles that share it must name the same one.
        [ "${unpacked[${folder}]}" = "${line}" ] || {
            log "target/agents/${folder} is claimed by two profiles: ${unpacked[${folder}]} and ${line}"
            exit 1
        }
        continue
    fi
    unpacked[${folder}]="${line}"
    bash "${REPO}/scripts/debian-package.sh" "${suite}" "${package}" "${version}" "${REPO}/target/agents/${folder}"
done 3<<< "${REGISTRY}"

# --- from = "cargo": crates built with their own Cargo.lock ------------------------------------
while read -r from package _ version folder <&3; do
    [ "${from}" = cargo ] || continue
    root="${REPO}/target/agents/${folder}"
    bin="${root}/bin/${package}"
    if [ -x "${bin}" ] && "${bin}" --version 2>/dev/null | grep -q "${version}"; then
        log "${package} ${version} already built at ${bin}"
        continue
    fi
    log "building ${package} ${version} (several minutes) into ${root}"
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
    # A stable target dir so an interrupted build resumes instead of starting over.
    CARGO_TARGET_DIR="${root}-build" nice -n 10 cargo install "${package}" \
        --version "${version}" --locked --root "${root}"
    "${bin}" --version >&2
done 3<<< "${REGISTRY}"
log "done"
