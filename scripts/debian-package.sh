#!/usr/bin/env bash
# Downloads one Debian package and unpacks it (dpkg-deb -x) into a folder, never installing it:
#
#   scripts/debian-package.sh SUITE PACKAGE UPSTREAM_VERSION DEST
#
#   SUITE             a Debian codename (bookworm, trixie, ...); the machine's own codename uses the
#                     system's apt configuration, any other one a private configuration derived from
#                     the machine's own sources entry with the suite swapped
#   UPSTREAM_VERSION  the version the caller was written for (e.g. 2.12.0.2): the package's
#                     version must start with it (Debian revisions like -3 or +deb13u1 may vary)
#   DEST              unpacked into DEST (target/agents/<name>-<version>/); DEST/.package names
#                     the exact package version, so a second run does nothing
#
# Nothing on the system changes: the private configuration, its package lists and the downloaded
# .deb live under target/apt/<suite>/. No archive host name is written anywhere by this script:
# the URIs are read from the machine's own sources entry.
set -euo pipefail

usage() { echo "usage: $0 SUITE PACKAGE UPSTREAM_VERSION DEST" >&2; exit 2; }
[ "$#" -eq 4 ] || usage
suite="$1" package="$2" upstream="$3" dest="$4"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'debian-package: %s\n' "$*" >&2; }

# What the package's install does for its Python modules (dpkg's postinst runs py3compile):
# byte-compiled once here, they are not compiled again by every run of the agent (the unpacked
# tree is read-only in the sandbox, so Python could never cache them itself). Only the modules
# (usr/lib/python3/dist-packages), with the interpreter the profiles run (Debian 12's
# /usr/bin/python3), whose version the stamp names: another one compiles them again. A module
# that does not compile is left to compile at import, as Python would anyway.
byte_compile() {
    local tree="$1" modules="$1/usr/lib/python3/dist-packages" python
    python="$(/usr/bin/python3 --version 2>&1)"
    [ "$(cat "${tree}/.byte-compiled" 2>/dev/null)" = "${python}" ] && return 0
    if [ -d "${modules}" ]; then
        /usr/bin/python3 -m compileall -q -j 0 "${modules}" >/dev/null \
            || log "warning: some modules in ${modules} did not byte-compile (${python}); they compile at import"
    fi
    echo "${python}" > "${tree}/.byte-compiled"
}

if [ -f "${dest}/.package" ] && grep -q "^${package} ${upstream}" "${dest}/.package"; then
    byte_compile "${dest}"
    log "$(cat "${dest}/.package") already unpacked in ${dest}"
    exit 0
fi

# shellcheck disable=SC1091
own_suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
[ -n "${own_suite}" ] || { log "/etc/os-release names no VERSION_CODENAME"; exit 1; }

work="${REPO}/target/apt/${suite}"
mkdir -p "${work}/lists/partial" "${work}/cache/archives/partial" "${work}/debs"
apt_opts=()
if [ "${suite}" != "${own_suite}" ]; then
    # The machine's own entry for its main suite: URIs, Components and Signed-By are kept, only
    # the suite is swapped. deb822 (.sources) first, then one-line sources.list entries.
    sources="${work}/sources.list"
    : > "${sources}.new"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "${f}" ] || continue
        awk -v own="${own_suite}" -v want="${suite}" '
            function flush() {
                if (uris != "" && has_own && is_deb) {
                    opts = (signed != "") ? "[signed-by=" signed "] " : ""
                    n = split(uris, u, " ")
                    for (i = 1; i <= n; i++) print "deb " opts u[i] " " want " " comps
                }
                uris = ""; comps = ""; signed = ""; has_own = 0; is_deb = 0
            }
            /^[[:space:]]*$/ { flush(); next }
            /^#/ { next }
            /^Types:/ { if ($0 ~ /(^|[[:space:]])deb([[:space:]]|$)/) is_deb = 1 }
            /^URIs:/ { sub(/^URIs:[[:space:]]*/, ""); uris = $0 }
            /^Components:/ { sub(/^Components:[[:space:]]*/, ""); comps = $0 }
            /^Signed-By:/ { sub(/^Signed-By:[[:space:]]*/, ""); signed = $0 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == own) has_own = 1 }
            END { flush() }
        ' "${f}" >> "${sources}.new"
    done
    if [ -f /etc/apt/sources.list ]; then
        awk -v own="${own_suite}" -v want="${suite}" '
            $1 == "deb" {
                for (i = 2; i <= NF; i++) if ($i == own) { $i = want; print; break }
            }
        ' /etc/apt/sources.list >> "${sources}.new"
    fi
    if [ ! -s "${sources}.new" ]; then
        log "no apt sources entry for suite ${own_suite} found in /etc/apt to derive ${suite} from"
        exit 1
    fi
    sort -u "${sources}.new" > "${sources}"
    rm -f "${sources}.new"
    apt_opts=(
        -o "Dir::Etc::sourcelist=${sources}"
        -o "Dir::Etc::sourceparts=-"
        -o "Dir::State::Lists=${work}/lists"
        -o "Dir::Cache=${work}/cache"
        -o "Dir::State::status=/dev/null"
        -o "APT::Sandbox::User=root"
    )
    if [ ! -e "${work}/lists/.updated" ] || [ -n "$(find "${work}/lists/.updated" -mmin +1440)" ]; then
        log "apt-get update (private configuration for ${suite})"
        apt-get "${apt_opts[@]}" update -qq
        touch "${work}/lists/.updated"
    fi
else
    if ! apt-cache policy "${package}" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        log "apt-get update"
        apt-get update -qq
    fi
    apt_opts=(-o "APT::Sandbox::User=root")
fi

version="$(apt-cache "${apt_opts[@]}" policy "${package}" | awk '/Candidate:/ { print $2 }')"
case "${version}" in
    "${upstream}"*) ;;
    *)
        log "${suite} offers ${package} ${version:-(none)}, expected ${upstream}"
        exit 1
        ;;
esac

deb="${work}/debs/${package}_${version}_all.deb"
if [ ! -s "${deb}" ]; then
    log "downloading ${package} ${version} from ${suite}"
    (cd "${work}/debs" && apt-get "${apt_opts[@]}" download "${package}=${version}" -qq)
    found="$(ls "${work}/debs/${package}_${version//:/%3a}_"*.deb 2>/dev/null | head -n1)"
    [ -n "${found}" ] || { log "apt-get download left no .deb in ${work}/debs"; exit 1; }
    [ "${found}" = "${deb}" ] || mv "${found}" "${deb}"
fi

rm -rf "${dest}.partial"
mkdir -p "${dest}.partial"
dpkg-deb -x "${deb}" "${dest}.partial"
echo "${package} ${version} ${suite}" > "${dest}.partial/.package"
rm -rf "${dest}"
mv "${dest}.partial" "${dest}"
byte_compile "${dest}"
log "${package} ${version} (${suite}) unpacked in ${dest}"
