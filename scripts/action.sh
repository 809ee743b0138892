#!/usr/bin/env bash
# action.sh: the steps of the composite GitHub Action (action.yml at the repository root), as a
# script so they can be run and tested anywhere (cli/tests/ci_action.rs runs them).
#
#   action.sh install   install wirecheck, fake-wireserver and provision-report from the release
#                       archive of this checkout's version (checksum verified, kept in the tool
#                       cache), else build them from this checkout (cargo install); put them
#                       on PATH (and on $GITHUB_PATH for the next steps)
#   action.sh run       wirecheck run with the INPUT_* settings below
#   action.sh merge     wirecheck merge INPUT_OUT INPUT_PARTS...
#
# Settings (environment; action.yml maps its inputs onto them):
#   INPUT_AGENT_CMD   an --agent-cmd template        INPUT_AGENT     or an --agent profile
#   INPUT_CLAIMS      --claims (e.g. json,failure)   INPUT_STRICT    true: --strict
#   INPUT_CASES       --cases globs, whitespace-separated (never expanded by the shell)
#   INPUT_EXCLUDE     --exclude globs, the same      INPUT_PARTITION --partition K/N
#   INPUT_RUN_ID      --run-id (merge refuses parts of other runs)
#   INPUT_OUT         results folder (default wirecheck-results)
#   INPUT_PARTS       merge: the parts' folders, whitespace-separated; globs are expanded
#   INPUT_SUMMARY     true (default): append the Markdown summary to $GITHUB_STEP_SUMMARY
#   INPUT_ARGS        extra flags, whitespace-separated, never globbed
#   INPUT_SUDO        true (default): when not root, run `wirecheck run` through sudo (PATH,
#                     and WIRECHECK_* are passed on, no other variable): every
#                     agent then runs beside its fake in a private network namespace, which
#                     GitHub's runners need (they are Azure VMs: 168.63.129.16 is a real
#                     wireserver); sandbox agents (WALinuxAgent, afterburn) need root anyway
#   WIRECHECK_SRC     the wirecheck checkout (the action's own folder)
#   WIRECHECK_ROOT    where a source build puts bin/ (default: $RUNNER_TEMP/wirecheck, else
#                     ./wirecheck); without $RUNNER_TOOL_CACHE, releases are kept there too
#   WIRECHECK_BIN_DIR install: use the binaries already in this folder (e.g. an install job's,
#                     shared as an artifact: their executable bit is restored)
#   WIRECHECK_RELEASE_URL  install: where the release files are: an http(s):// URL, a file://
#                     URL or a folder holding wirecheck-<version>-<target>.tar.gz and its .sha256
#                     (scripts/release.sh writes them). Default: the GitHub release v<version> of
#                     the action's repository, used when the action's ref is that tag, or a
#                     commit the release was built from; any other ref builds from source
#   WIRECHECK_ACTION_REF, WIRECHECK_ACTION_REPOSITORY  the action's ref and owner/name
#                     (action.yml sets them from github.action_ref and github.action_repository)
#   RUNNER_TOOL_CACHE install: releases are kept in <it>/wirecheck/<version>/<x64|arm64>/
#
# Install from a release: the .sha256 is fetched first; the archive only when the tool cache
# does not hold that very archive; it must match the .sha256 (a mismatch stops the install,
# naming the file and both hashes), unpack to the three binaries, and be wirecheck <version>.
# A location without the files for this machine falls back to building from source.
#
# Exit status: wirecheck's (0 passed, 1 a case failed, 2 wirecheck could not run or merge);
# 3 this script's own setup failed (the message says what to set). `exit-status` and
# `results` are written to $GITHUB_OUTPUT when it is set.
set -euo pipefail

die() {
    echo "wirecheck action: $*" >&2
    exit 3
}

out="${INPUT_OUT:-wirecheck-results}"
[ -n "$out" ] || out=wirecheck-results

words() { # $1: text -> the array `split` (whitespace-separated, no globbing)
    split=()
    local glob_was_off=0
    case $- in *f*) glob_was_off=1 ;; esac
    set -f
    # shellcheck disable=SC2206
    [ -n "$1" ] && split=($1)
    [ "$glob_was_off" = 1 ] || set +f
    return 0
}

is_true() {
    case "${1:-}" in
    true | TRUE | True | 1 | yes) return 0 ;;
    false | FALSE | False | 0 | no | "") return 1 ;;
    *) die "expected true or false, got ${1@Q}" ;;
    esac
}

output() {
    if [ -n "${GITHUB_OUTPUT:-}" ]; then
        echo "$1" >>"$GITHUB_OUTPUT"
    fi
}

BINARIES=(wirecheck fake-wireserver provision-report)
# Bounds what a release location may send (the archives are a few MiB).
MAX_DOWNLOAD=$((256 << 20))

# The version of this checkout (the action's own ref): [workspace.package] in Cargo.toml.
checkout_version() {
    sed -n '/^\[workspace\.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$1/Cargo.toml" | head -n1
}

# Sets `release` (the folder or URL holding the files), `version`, `target`, `expect_commit`;
# or leaves `release` empty, saying why (install then builds from source).
release_location() {
    local src="$1" ref="${WIRECHECK_ACTION_REF:-}" repository
    release=
    version="$(checkout_version "$src")"
    [ -n "$version" ] || die "$src/Cargo.toml names no [workspace.package] version"
    case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) target=x86_64-unknown-linux-gnu ;;
    Linux/aarch64 | Linux/arm64) target=aarch64-unknown-linux-gnu ;;
    *) echo "==> no wirecheck release for $(uname -s)/$(uname -m): building from source" >&2; return 0 ;;
    esac
    # A commit ref takes the release's binaries only if they were built from that commit.
    expect_commit=
    if [[ "$ref" =~ ^[0-9a-f]{40}$ ]]; then expect_commit="$ref"; fi
    if [ -n "${WIRECHECK_RELEASE_URL:-}" ]; then
        release="$WIRECHECK_RELEASE_URL"
        return 0
    fi
    if [ "$ref" != "v$version" ] && [ -z "$expect_commit" ]; then
        echo "==> the action's ref (${ref:-none}) is not a release tag (v$version) or a commit: building from source, a few minutes (pin @v$version to install in seconds)" >&2
        return 0
    fi
    repository="${WIRECHECK_ACTION_REPOSITORY:+${GITHUB_SERVER_URL:-https://github.com}/$WIRECHECK_ACTION_REPOSITORY}"
    if [ -z "$repository" ]; then
        repository="$(sed -n 's/^repository = "\(.*\)"$/\1/p' "$src/Cargo.toml" | head -n1)"
    fi
    [ -n "$repository" ] || die "$src/Cargo.toml names no repository to download releases from"
    release="$repository/releases/download/v$version"
}

# Copies the file $1 of the release location to $2: 0, or 1 when it is not there (any other
# failure stops the install).
fetch() {
    local from="${release%/}/$1" code
    case "$from" in
    http://* | https://*)
        command -v curl >/dev/null 2>&1 || die "curl is needed to download $from"
        code="$(curl -sSL --proto '=http,https' --retry 3 --max-filesize "$MAX_DOWNLOAD" \
            -o "$2" -w '%{http_code}' "$from")" || die "downloading $from failed"
        case "$code" in
        200) return 0 ;;
        404) return 1 ;;
        *) die "downloading $from: HTTP $code" ;;
        esac
        ;;
    *)
        from="${from#file://}"
        [ -f "$from" ] || return 1
        [ "$(stat -c %s "$from")" -le "$MAX_DOWNLOAD" ] || die "$from is larger than $MAX_DOWNLOAD bytes"
        cp "$from" "$2" || die "cannot copy $from"
        ;;
    esac
}

# The hash a .sha256 file (as `sha256sum` writes it) gives for the file named $2.
expected_hash() {
    local line
    line="$(head -c 4096 "$1")"
    [[ "$line" =~ ^([0-9a-f]{64})\ [\ *]"$2"$ ]] \
        || die "$2.sha256 (from $release) is not a sha256sum line for $2: refusing the archive"
    echo "${BASH_REMATCH[1]}"
}

# Whether the binaries in $1 (what $2 names) are the build wanted: stops the install when
# they are not wirecheck $version; 1 (build from source) when the action's ref is a commit
# they were not built from.
wanted_build() {
    local said
    said="$("$1/wirecheck" --version)" || die "$2: wirecheck --version failed"
    [[ "$said" == "wirecheck $version (commit "*")" ]] || die "$2 holds \"$said\", not wirecheck $version"
    if [ -n "$expect_commit" ] && [ "$said" != "wirecheck $version (commit $expect_commit)" ]; then
        echo "==> release v$version is \"$said\", not the action's commit $expect_commit: building from source" >&2
        return 1
    fi
}

# Installs the release archive for this machine into `bin` (the tool cache); leaves `bin`
# empty when the release location has none (install then builds from source).
install_release() {
    local name="wirecheck-$version-$target" arch tmp expected actual b
    case "$target" in x86_64-*) arch=x64 ;; *) arch=arm64 ;; esac
    local cache="${RUNNER_TOOL_CACHE:-${WIRECHECK_ROOT:-${RUNNER_TEMP:-.}/wirecheck}}/wirecheck/$version"
    bin=
    tmp="$(mktemp -d)"
    tmp_dir="$tmp"
    trap 'rm -rf "$tmp_dir"' EXIT
    if ! fetch "$name.tar.gz.sha256" "$tmp/sum"; then
        echo "==> $release has no $name.tar.gz.sha256: building from source" >&2
        return 0
    fi
    expected="$(expected_hash "$tmp/sum" "$name.tar.gz")"
    # The tool cache holds this very archive (same checksum): no download.
    if [ -f "$cache/$arch.complete" ] && [ "$(cat "$cache/$arch.complete")" = "$expected" ] \
        && [ -x "$cache/$arch/wirecheck" ]; then
        wanted_build "$cache/$arch" "the tool cache's $cache/$arch" || return 0
        echo "==> wirecheck $version from the tool cache ($cache/$arch)" >&2
        bin="$cache/$arch"
        return 0
    fi
    echo "==> downloading $name.tar.gz from $release" >&2
    if ! fetch "$name.tar.gz" "$tmp/$name.tar.gz"; then
        echo "==> $release has no $name.tar.gz: building from source" >&2
        return 0
    fi
    actual="$(sha256sum "$tmp/$name.tar.gz" | cut -d' ' -f1)"
    [ "$actual" = "$expected" ] \
        || die "$name.tar.gz: checksum mismatch: $name.tar.gz.sha256 says $expected, the file's is $actual (from $release): refusing it"
    mkdir "$tmp/x"
    tar --no-same-owner -xzf "$tmp/$name.tar.gz" -C "$tmp/x" || die "$name.tar.gz does not unpack"
    for b in "${BINARIES[@]}"; do
        [ -f "$tmp/x/$name/$b" ] && [ ! -L "$tmp/x/$name/$b" ] && [ -x "$tmp/x/$name/$b" ] \
            || die "$name.tar.gz has no executable $name/$b"
    done
    wanted_build "$tmp/x/$name" "$name.tar.gz" || return 0
    rm -rf "${cache:?}/$arch" "$cache/$arch.complete"
    mkdir -p "$cache"
    mv "$tmp/x/$name" "$cache/$arch"
    echo "$expected" >"$cache/$arch.complete"
    bin="$cache/$arch"
}

# cargo install of this checkout's crates into WIRECHECK_ROOT; sets `bin`.
install_from_source() {
    local src="$1"
    command -v cargo >/dev/null 2>&1 \
        || die "cargo is needed to build wirecheck (GitHub's ubuntu runners have it; else use dtolnay/rust-toolchain first)"
    local root="${WIRECHECK_ROOT:-${RUNNER_TEMP:-.}/wirecheck}"
    mkdir -p "$root"
    root="$(cd "$root" && pwd)"
    local crates=(cli fake-wireserver-cli)
    # The bundled reporter only when it is the agent under test.
    case ",${INPUT_AGENT:-}," in *,provision-report,*) crates+=(reporter) ;; esac
    for crate in "${crates[@]}"; do
        echo "==> building $crate" >&2
        CARGO_TARGET_DIR="$root/target" cargo install --locked --quiet --force \
            --root "$root" --path "$src/$crate" || die "building $crate failed"
    done
    bin="$root/bin"
}

install() {
    local bin release version target expect_commit
    if [ -n "${WIRECHECK_BIN_DIR:-}" ]; then
        bin="$WIRECHECK_BIN_DIR"
        [ -f "$bin/wirecheck" ] || die "WIRECHECK_BIN_DIR=$bin has no wirecheck"
        # Binaries shared through a workflow artifact lose their executable bit.
        local b
        for b in "${BINARIES[@]}"; do
            if [ -f "$bin/$b" ] && [ ! -x "$bin/$b" ]; then chmod +x "$bin/$b"; fi
        done
    else
        local src="${WIRECHECK_SRC:-}"
        [ -n "$src" ] && [ -f "$src/conformance/Cargo.toml" ] \
            || die "WIRECHECK_SRC must be a wirecheck checkout (the action sets it to its own folder)"
        # Plain calls, not conditions: `set -e` holds inside them.
        release_location "$src"
        bin=
        if [ -n "$release" ]; then install_release; fi
        if [ -z "$bin" ]; then install_from_source "$src"; fi
    fi
    bin="$(cd "$bin" && pwd)"
    if [ -n "${GITHUB_PATH:-}" ]; then
        echo "$bin" >>"$GITHUB_PATH"
    fi
    output "bin=$bin"
    echo "==> wirecheck: $("$bin/wirecheck" --version)" >&2
}

find_wirecheck() {
    if [ -n "${WIRECHECK_BIN_DIR:-}" ]; then
        wirecheck="$WIRECHECK_BIN_DIR/wirecheck"
    else
        wirecheck="$(command -v wirecheck)" || die "wirecheck is not on PATH: run \`action.sh install\` first"
    fi
}

summary_args() {
    summary=()
    if is_true "${INPUT_SUMMARY:-true}" && [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        summary=(--summary "$GITHUB_STEP_SUMMARY")
    fi
}

run() {
    find_wirecheck
    local args=(run --quiet --out "$out")
    if [ -n "${INPUT_AGENT_CMD:-}" ]; then
        args+=(--agent-cmd "$INPUT_AGENT_CMD")
    fi
    if [ -n "${INPUT_AGENT:-}" ]; then
        args+=(--agent "$INPUT_AGENT")
    fi
    [ -n "${INPUT_AGENT_CMD:-}${INPUT_AGENT:-}" ] \
        || die "set the agent-cmd input (a command template) or the agent input (a profile)"
    [ -z "${INPUT_CLAIMS:-}" ] || args+=(--claims "$INPUT_CLAIMS")
    words "${INPUT_CASES:-}"
    for g in "${split[@]}"; do args+=(--cases "$g"); done
    words "${INPUT_EXCLUDE:-}"
    for g in "${split[@]}"; do args+=(--exclude "$g"); done
    [ -z "${INPUT_PARTITION:-}" ] || args+=(--partition "$INPUT_PARTITION")
    [ -z "${INPUT_RUN_ID:-}" ] || args+=(--run-id "$INPUT_RUN_ID")
    if is_true "${INPUT_STRICT:-false}"; then args+=(--strict); fi
    summary_args
    args+=("${summary[@]}")
    words "${INPUT_ARGS:-}"
    args+=("${split[@]}")

    local as_root=()
    if is_true "${INPUT_SUDO:-true}" && [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "sudo is needed (or set the sudo input to false)"
        # sudo resets the environment: PATH (the agent and the tools it calls are found as
        # they are here) and wirecheck's own variables go through; nothing else (RUST_LOG
        # would reach no agent: wirecheck keeps what changes a runtime from them).
        as_root=(sudo env "PATH=$PATH")
        local name
        for name in $(compgen -e); do
            case "$name" in
                WIRECHECK_*) as_root+=("$name=${!name}") ;;
            esac
        done
    fi
    echo "==> ${as_root[*]:+sudo }wirecheck ${args[*]}" >&2
    local status=0
    "${as_root[@]}" "$wirecheck" "${args[@]}" || status=$?
    if [ "${#as_root[@]}" -gt 0 ] && [ -e "$out" ]; then
        # The results belong to the runner's user again, for the upload step.
        sudo chown -R "$(id -u):$(id -g)" "$out" || die "cannot give $out back to $(id -un)"
    fi
    output "exit-status=$status"
    output "results=$out"
    return "$status"
}

merge() {
    find_wirecheck
    [ -n "${INPUT_PARTS:-}" ] || die "set the parts input: the folders of the --partition runs"
    # Globs expanded (download-artifact leaves one folder per part); whitespace-separated.
    local parts=() p
    set +f
    for p in ${INPUT_PARTS}; do
        [ -e "$p" ] || die "part $p does not exist"
        parts+=("$p")
    done
    local args=(merge "$out" "${parts[@]}")
    if is_true "${INPUT_STRICT:-false}"; then args+=(--strict); fi
    summary_args
    args+=("${summary[@]}")
    echo "==> wirecheck ${args[*]}" >&2
    local status=0
    "$wirecheck" "${args[@]}" || status=$?
    output "exit-status=$status"
    output "results=$out"
    return "$status"
}

case "${1:-}" in
install) install ;;
run) run ;;
merge) merge ;;
*) die "usage: action.sh install|run|merge" ;;
esac
