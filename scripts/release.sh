#!/usr/bin/env bash
# release.sh: wirecheck's release files, for the release workflow (.github/workflows/release.yml)
# and for anyone who wants them from a checkout:
#
#   scripts/release.sh [--target TRIPLE]... [--glibc X.Y] [--allow-dirty] OUTDIR
#   scripts/release.sh --bin-dir DIR [--target TRIPLE] OUTDIR
#
# For each target (default: x86_64-unknown-linux-gnu and aarch64-unknown-linux-gnu), in OUTDIR:
#   wirecheck-<version>-<target>.tar.gz   wirecheck-<version>-<target>/ holding wirecheck,
#                                         fake-wireserver, provision-report, agent time's
#                                         libwirecheck_agent_clock.so, LICENSE, README.md
#   wirecheck_<version>-1_<arch>.deb      the same binaries in /usr/bin, the library in
#                                         /usr/lib/wirecheck (arch: amd64, arm64)
#   <file>.sha256 beside each             `sha256sum -c <file>.sha256` checks it
#
# By default it builds release binaries with `cargo zigbuild --target <target>.<glibc>` (glibc
# 2.17 unless --glibc: they run on any Linux with glibc >= 2.17), and checks what it built:
# the ELF machine of each binary and the newest glibc symbol version it needs. The commit
# (HEAD, which must be clean unless --allow-dirty) is given to the build as WIRECHECK_COMMIT, so
# `wirecheck --version` names it. Needs cargo-zigbuild and zig (`pip install cargo-zigbuild
# ziglang`) and the target's Rust std (`rustup target add`).
#
# --bin-dir DIR packages binaries already built instead (e.g. target/debug: the test command
# packages its own debug build in seconds rather than building a release), stripped of their
# symbols and debug information as a release build is: one target, the host's unless --target
# says otherwise. The files are named and laid out as a release.
#
# Exit status: 0, or 2 with a message naming what is wrong. OUTDIR is written whole or not at
# all (everything is made in OUTDIR/.partial, then moved).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BINARIES=(wirecheck fake-wireserver provision-report)
# Agent time's preload (crate wirecheck-agent-clock), found beside wirecheck or in
# /usr/lib/wirecheck (fake_wireserver::clock::agent_clock_library).
LIBRARY=libwirecheck_agent_clock.so

die() {
    echo "release.sh: $*" >&2
    exit 2
}
log() { echo "release.sh: $*" >&2; }

usage() {
    die "usage: release.sh [--target TRIPLE]... [--glibc X.Y] [--allow-dirty] [--bin-dir DIR] OUTDIR"
}

targets=()
glibc=2.17
bin_dir=
allow_dirty=
out=
while [ "$#" -gt 0 ]; do
    case "$1" in
    --target) [ "$#" -ge 2 ] || usage; targets+=("$2"); shift 2 ;;
    --glibc) [ "$#" -ge 2 ] || usage; glibc="$2"; shift 2 ;;
    --bin-dir) [ "$#" -ge 2 ] || usage; bin_dir="$2"; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    -*) usage ;;
    *) [ -z "$out" ] || usage; out="$1"; shift ;;
    esac
done
[ -n "$out" ] || usage
[[ "$glibc" =~ ^2\.[0-9]+$ ]] || die "--glibc $glibc: expected a glibc version such as 2.17"

# The workspace's version and the package metadata, from cargo (one source: the manifests).
metadata="$(cd "$REPO" && cargo metadata --no-deps --format-version 1 --offline)" \
    || die "cargo metadata failed in $REPO"
field() { # $1: a Python expression over `pkg` (the wirecheck package, cli/) -> its text
    python3 -c 'import json, sys
pkg = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "wirecheck")
print(eval(sys.argv[1]))' "$1" <<<"$metadata"
}
version="$(field 'pkg["version"]')"
repository="$(field 'pkg["repository"] or ""')"

host_target() {
    local arch
    arch="$(uname -m)"
    case "$arch" in
    x86_64 | aarch64) echo "$arch-unknown-linux-gnu" ;;
    *) die "no release target for this machine ($arch)" ;;
    esac
}

deb_arch() {
    case "$1" in
    x86_64-*) echo amd64 ;;
    aarch64-*) echo arm64 ;;
    *) die "no Debian architecture for $1" ;;
    esac
}

elf_machine() {
    case "$1" in
    x86_64-*) echo "Advanced Micro Devices X86-64" ;;
    aarch64-*) echo "AArch64" ;;
    esac
}

if [ -n "$bin_dir" ]; then
    [ "${#targets[@]}" -le 1 ] || die "--bin-dir packages one target"
    [ "${#targets[@]}" -eq 1 ] || targets=("$(host_target)")
    [ -d "$bin_dir" ] || die "--bin-dir $bin_dir is not a folder"
    bin_dir="$(cd "$bin_dir" && pwd)"
else
    [ "${#targets[@]}" -gt 0 ] || targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
fi
for t in "${targets[@]}"; do
    case "$t" in
    x86_64-unknown-linux-gnu | aarch64-unknown-linux-gnu) ;;
    *) die "--target $t: release targets are x86_64-unknown-linux-gnu and aarch64-unknown-linux-gnu" ;;
    esac
done

# OUTDIR: new or empty; written whole or not at all.
if [ -e "$out" ]; then
    [ -d "$out" ] || die "$out exists and is not a folder"
    [ -z "$(ls -A "$out")" ] || die "$out is not empty (the release files go into an empty folder)"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
partial="$out/.partial"
trap 'rm -rf "$partial"' EXIT
rm -rf "$partial"
mkdir -p "$partial"

commit_of_checkout() {
    git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown
}

# The newest GLIBC_x.y symbol version a binary needs ("none" when it needs none).
glibc_needed() {
    readelf --version-info --wide "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' \
        | sort -V | tail -n1 | grep . || echo none
}

# Builds one target's binaries with zig's linker against glibc $glibc; prints their folder.
build_target() {
    local target="$1"
    command -v cargo-zigbuild >/dev/null 2>&1 \
        || die "cargo-zigbuild is needed to build $target against glibc $glibc: pip install cargo-zigbuild ziglang"
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        log "adding the Rust std for $target (rustup target add $target)"
        rustup target add "$target" >&2 || die "rustup target add $target failed: the Rust std for $target is needed"
    fi
    log "building $target (glibc $glibc) at commit $commit"
    # No commit (a source tarball without .git): the build says `unknown` itself.
    local given="$commit"
    [ "$given" != unknown ] || given=
    (cd "$REPO" && WIRECHECK_COMMIT="$given" CARGO_PROFILE_RELEASE_STRIP=symbols \
        cargo zigbuild --release --locked --target "$target.$glibc" \
        -p wirecheck -p fake-wireserver-cli -p reporter --bins >&2) \
        || die "building $target failed"
    (cd "$REPO" && CARGO_PROFILE_RELEASE_STRIP=symbols \
        cargo zigbuild --release --locked --target "$target.$glibc" \
        -p wirecheck-agent-clock --lib >&2) \
        || die "building $target's $LIBRARY failed"
    echo "${CARGO_TARGET_DIR:-$REPO/target}/$target/release"
}

# Checks a target's binaries are that target's, and (when built here) need at most $glibc.
check_binaries() {
    local target="$1" dir="$2" name machine needed
    machine="$(elf_machine "$target")"
    [ -f "$dir/$LIBRARY" ] \
        || die "$dir/$LIBRARY is missing (agent time's preload: cargo build -p wirecheck-agent-clock)"
    for name in "${BINARIES[@]}"; do
        [ -x "$dir/$name" ] || die "$dir/$name is missing (or not executable)"
    done
    for name in "${BINARIES[@]}" "$LIBRARY"; do
        readelf -h "$dir/$name" | grep -q "Machine: *$machine\$" \
            || die "$dir/$name is not a $target binary ($(readelf -h "$dir/$name" | grep Machine:))"
        needed="$(glibc_needed "$dir/$name")"
        if [ -z "$bin_dir" ] && [ "$needed" != none ] \
            && [ "$(printf '%s\n%s\n' "$needed" "$glibc" | sort -V | tail -n1)" != "$glibc" ]; then
            die "$dir/$name needs glibc $needed, newer than --glibc $glibc"
        fi
    done
}

readme() { # $1 target, $2 the newest glibc the binaries need
    cat <<EOF
# wirecheck $version ($1)

Built from commit $commit of $repository.

wirecheck runs Azure provisioning agents against a fake wireserver + IMDS and judges what they
send and write. This archive holds:

| file | what |
|---|---|
| \`wirecheck\` | the conformance suite (\`wirecheck run\`); the default scenarios and agent profiles are built in |
| \`fake-wireserver\` | the fake wireserver + IMDS on its own |
| \`provision-report\` | the reference provisioning health reporter (the default agent of \`wirecheck run\`) |
| \`$LIBRARY\` | agent time: preloaded (with Debian's libfaketime) into agents whose clock runs faster; found beside \`wirecheck\` |

Needs Linux with glibc $2 or newer. Quick start: \`./wirecheck run\` judges the bundled
reporter; \`./wirecheck run --agent-cmd '...'\` your agent (\`./wirecheck run --help\`). In CI,
run it as root (or through sudo) so every agent runs in a private network namespace: see
docs/ci.md in the repository.

Licence: MIT (LICENSE).
EOF
}

# Writes $2.sha256 beside the file $2 in folder $1, as sha256sum prints it.
checksum() {
    (cd "$1" && sha256sum "$2" >"$2.sha256")
}

package_archive() { # $1 target, $2 binaries folder, $3 glibc needed
    local name="wirecheck-$version-$1" b
    local stage="$partial/stage/$name"
    mkdir -p "$stage"
    for b in "${BINARIES[@]}"; do install -m 0755 "$2/$b" "$stage/$b"; done
    install -m 0644 "$2/$LIBRARY" "$stage/$LIBRARY"
    install -m 0644 "$REPO/LICENSE" "$stage/LICENSE"
    readme "$1" "$3" >"$stage/README.md"
    chmod 0644 "$stage/README.md"
    # Reproducible: sorted names, no owners, the commit's time, no gzip timestamp (gzip -6:
    # -9 takes three times as long for 1% less).
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
        -C "$partial/stage" -cf - "$name" | gzip -n -6 >"$partial/$name.tar.gz"
    checksum "$partial" "$name.tar.gz"
}

package_deb() { # $1 target, $2 binaries folder, $3 glibc needed
    local arch b depends
    arch="$(deb_arch "$1")"
    local name="wirecheck_${version}-1_${arch}.deb"
    local root="$partial/deb-$arch"
    mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/wirecheck" "$root/usr/share/doc/wirecheck"
    for b in "${BINARIES[@]}"; do install -m 0755 "$2/$b" "$root/usr/bin/$b"; done
    install -m 0644 "$2/$LIBRARY" "$root/usr/lib/wirecheck/$LIBRARY"
    readme "$1" "$3" >"$root/usr/share/doc/wirecheck/README.md"
    {
        echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
        echo "Upstream-Name: wirecheck"
        echo "Source: $repository"
        echo
        echo "Files: *"
        echo "License: MIT"
        sed 's/^$/./; s/^/ /' "$REPO/LICENSE"
    } >"$root/usr/share/doc/wirecheck/copyright"
    chmod 0644 "$root/usr/share/doc/wirecheck/"*
    depends="libc6 (>= ${3/none/2.17})"
    if readelf -d "$2/wirecheck" | grep -q 'libgcc_s.so.1'; then
        depends="$depends, libgcc-s1 | libgcc1"
    fi
    {
        echo "Package: wirecheck"
        echo "Version: $version-1"
        echo "Architecture: $arch"
        echo "Maintainer: $(field 'pkg["metadata"]["deb"]["maintainer"]')"
        echo "Installed-Size: $(du -sk "$root/usr" | cut -f1)"
        echo "Depends: $depends"
        echo "Section: $(field 'pkg["metadata"]["deb"]["section"]')"
        echo "Priority: $(field 'pkg["metadata"]["deb"]["priority"]')"
        echo "Homepage: $repository"
        echo "Description: $(field 'pkg["description"]')"
        field 'pkg["metadata"]["deb"]["extended-description"]' | fold -s -w 78 | sed 's/ *$//; s/^/ /'
    } >"$root/DEBIAN/control"
    # gzip, not dpkg-deb's default xz: a tenth of the time, for a somewhat larger file.
    dpkg-deb -Zgzip -z6 --root-owner-group --build "$root" "$partial/$name" >/dev/null \
        || die "dpkg-deb could not build $name"
    checksum "$partial" "$name"
}

commit="$(commit_of_checkout)"
if [ -z "$bin_dir" ] && [ "$commit" != unknown ] && [ -z "$allow_dirty" ] \
    && [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
    die "the checkout has uncommitted changes: the binaries would say commit ${commit:0:12}, which they are not (commit, or --allow-dirty)"
fi
if [ -n "$bin_dir" ]; then
    # The binaries name their own build: show that, not the checkout's HEAD.
    built="$("$bin_dir/wirecheck" --version 2>/dev/null || true)"
    [[ "$built" =~ \(commit\ ([0-9a-f]+|unknown)\)$ ]] && commit="${BASH_REMATCH[1]}"
fi
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || date +%s)}"

# Copies of the binaries in $1 without their symbols and debug information (what a release
# build's CARGO_PROFILE_RELEASE_STRIP=symbols gives); prints their folder.
stripped_copies() {
    local b dir="$partial/stripped"
    mkdir -p "$dir"
    for b in "${BINARIES[@]}" "$LIBRARY"; do
        [ -f "$1/$b" ] || die "$1/$b is missing"
        # A shared library keeps its dynamic symbols (what the preload interposes).
        strip -o "$dir/$b" "$1/$b" || die "strip could not strip $1/$b (a binary of another machine?)"
    done
    echo "$dir"
}

for target in "${targets[@]}"; do
    if [ -n "$bin_dir" ]; then
        # A debug build's binaries are mostly debug information: ten times the size.
        dir="$(stripped_copies "$bin_dir")"
    else
        dir="$(build_target "$target")"
    fi
    check_binaries "$target" "$dir"
    # The newest glibc any shipped file needs (the .deb's Depends, the README).
    needed="$(for f in "${BINARIES[@]}" "$LIBRARY"; do glibc_needed "$dir/$f"; done \
        | grep -v '^none$' | sort -V | tail -n1 | grep . || echo none)"
    if [ "$target" = "$(host_target)" ]; then
        # What users will see: the version (and, when built here, the commit).
        said="$("$dir/wirecheck" --version)" || die "$dir/wirecheck --version failed"
        case "$said" in
        "wirecheck $version (commit $commit)") ;;
        *) die "$dir/wirecheck --version says \"$said\", expected \"wirecheck $version (commit $commit)\"" ;;
        esac
    fi
    package_archive "$target" "$dir" "$needed"
    package_deb "$target" "$dir" "$needed"
    log "$target: wirecheck-$version-$target.tar.gz, wirecheck_${version}-1_$(deb_arch "$target").deb (glibc $needed)"
done

rm -rf "$partial/stage" "$partial/stripped" "$partial"/deb-*
mv "$partial"/* "$out"/
rmdir "$partial"
log "wrote $out: $(cd "$out" && ls | tr '\n' ' ')"
