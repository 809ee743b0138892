#!/usr/bin/env bash
# action.sh: the steps of the composite GitHub Action (action.yml at the repository root), as a
# script so they can be run and tested anywhere (cli/tests/ci_action.rs runs them).
#
#   action.sh install   build wirecheck + fake-wireserver from this checkout (cargo install),
#                       put them on PATH (and on $GITHUB_PATH for the next steps)
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
#                     WIRECHECK_* and RUST_LOG are passed on, no other variable): every
#                     agent then runs beside its fake in a private network namespace, which
#                     GitHub's runners need (they are Azure VMs: 168.63.129.16 is a real
#                     wireserver); sandbox agents (WALinuxAgent, afterburn) need root anyway
#   WIRECHECK_SRC     the wirecheck checkout (the action's own folder)
#   WIRECHECK_ROOT    where install puts bin/ (default: $RUNNER_TEMP/wirecheck, else ./wirecheck)
#   WIRECHECK_BIN_DIR install: use the binaries already in this folder instead of building
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

install() {
    local bin
    if [ -n "${WIRECHECK_BIN_DIR:-}" ]; then
        bin="$WIRECHECK_BIN_DIR"
        [ -x "$bin/wirecheck" ] || die "WIRECHECK_BIN_DIR=$bin has no wirecheck"
    else
        local src="${WIRECHECK_SRC:-}"
        [ -n "$src" ] && [ -f "$src/conformance/Cargo.toml" ] \
            || die "WIRECHECK_SRC must be a wirecheck checkout (the action sets it to its own folder)"
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
        # they are here), wirecheck's own variables and RUST_LOG go through; nothing else.
        as_root=(sudo env "PATH=$PATH")
        local name
        for name in $(compgen -e); do
            case "$name" in
                WIRECHECK_* | RUST_LOG) as_root+=("$name=${!name}") ;;
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
