#!/usr/bin/env bash
# run-wirecheck.sh: run the wirecheck conformance suite against your provisioning agent.
#
# Copy this file into your project (for example ci/run-wirecheck.sh) and call it from any CI.
# It fetches and builds wirecheck (unless told where they are), runs it against your agent, and
# leaves results.json, junit.xml and report.html in WIRECHECK_OUT for your CI to keep.
#
# Exit status is wirecheck's: 0 every case passed (non-strict allowed unless --strict),
# 1 a case failed, 2 wirecheck could not run (bad flags, profile or scenario);
# 3 this script's own setup failed (the message says what to set).
#
# Configuration (environment; the WIRECHECK_AGENT*, WIRECHECK_OUT names are wirecheck's own):
#   WIRECHECK_AGENT_CMD  how to start your agent for one case: a command template, e.g.
#                          "$PWD/target/release/my-agent {action} --wireserver {wireserver_url} --imds {imds_url}"
#                        (`wirecheck run --help` lists the placeholders; give the program as an
#                        absolute path or a name on PATH: the agent runs inside its case's folder)
#   WIRECHECK_AGENT      or: an agent profile (a .toml file, or the name of a bundled profile)
#   WIRECHECK_OUT        results folder (default: wirecheck-results)
#   WIRECHECK_ARGS       extra flags for `wirecheck run`, split on whitespace, never globbed,
#                        e.g. '--strict --cases wire.*'
#   WIRECHECK_GIT        git URL of wirecheck (needed unless WIRECHECK_SRC is set)
#   WIRECHECK_REV        commit, tag or branch to use (default: the repository's default branch)
#   WIRECHECK_SRC        an existing wirecheck checkout to use instead of fetching one
#   WIRECHECK_BIN        an existing wirecheck binary to use instead of building one
#   WIRECHECK_ROOT       where the checkout and the build go (default: .wirecheck; cache it in CI)
#   WIRECHECK_SUDO       1: when not root, run `wirecheck run` (only that) through sudo, so every
#                        agent runs beside the fake in a private network namespace. Set it on
#                        Azure-hosted runners (GitHub's are): there 168.63.129.16 is a real
#                        wireserver, which an agent ignoring its URL or proxy would otherwise reach.
set -euo pipefail

die() {
    echo "run-wirecheck.sh: $*" >&2
    exit 3
}

out="${WIRECHECK_OUT:-wirecheck-results}"
root="${WIRECHECK_ROOT:-.wirecheck}"

# 1. The wirecheck sources: the scenarios and bundled profiles come from the same revision as
#    the binary, so results are reproducible.
src="${WIRECHECK_SRC:-}"
if [ -z "$src" ]; then
    [ -n "${WIRECHECK_GIT:-}" ] || die "set WIRECHECK_GIT to the wirecheck repository URL (or WIRECHECK_SRC to a checkout)"
    command -v git >/dev/null 2>&1 || die "git is needed to fetch wirecheck"
    src="$root/src"
    if [ ! -d "$src/.git" ]; then
        mkdir -p "$src"
        git init -q "$src"
        git -C "$src" remote add origin "$WIRECHECK_GIT"
    else
        git -C "$src" remote set-url origin "$WIRECHECK_GIT"
    fi
    echo "==> fetching wirecheck ${WIRECHECK_REV:-(default branch)} from $WIRECHECK_GIT" >&2
    git -C "$src" fetch -q --depth 1 origin "${WIRECHECK_REV:-HEAD}" \
        || die "cannot fetch ${WIRECHECK_REV:-the default branch} from $WIRECHECK_GIT"
    git -C "$src" checkout -q --force FETCH_HEAD
fi
[ -d "$src/scenarios" ] && [ -d "$src/conformance/agents" ] \
    || die "$src is not a wirecheck checkout (no scenarios/ or conformance/agents/)"

# 2. The binary.
if [ -n "${WIRECHECK_BIN:-}" ]; then
    wirecheck="$WIRECHECK_BIN"
    [ -x "$wirecheck" ] || die "WIRECHECK_BIN=$wirecheck is not an executable file"
else
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to build wirecheck (https://rustup.rs), or set WIRECHECK_BIN"
    mkdir -p "$root"
    root_abs="$(cd "$root" && pwd)"
    wirecheck="$root_abs/bin/wirecheck"
    revision="$(git -C "$src" rev-parse HEAD 2>/dev/null || true)"
    if [ -z "$revision" ] || [ ! -x "$wirecheck" ] || [ "$(cat "$root_abs/installed-revision" 2>/dev/null)" != "$revision" ]; then
        echo "==> building wirecheck ${revision:-from $src}" >&2
        # fake-wireserver too: agents attached in a network namespace run under it.
        for crate in cli fake-wireserver-cli; do
            CARGO_TARGET_DIR="$root_abs/target" cargo install --locked --force --quiet \
                --root "$root_abs" --path "$src/$crate" || die "building $crate from $src failed"
        done
        [ -n "$revision" ] && echo "$revision" >"$root_abs/installed-revision"
    fi
    export PATH="$root_abs/bin:$PATH"
fi

# 3. The agent under test.
agent=()
if [ -n "${WIRECHECK_AGENT_CMD:-}" ]; then
    agent=(--agent-cmd "$WIRECHECK_AGENT_CMD")
elif [ -n "${WIRECHECK_AGENT:-}" ]; then
    agent=(--agent "$WIRECHECK_AGENT")
else
    die "set WIRECHECK_AGENT_CMD (a command template) or WIRECHECK_AGENT (a profile)"
fi
# wirecheck reads these names itself too; the flags above say it once.
unset WIRECHECK_AGENT WIRECHECK_AGENT_CMD WIRECHECK_OUT

extra=()
if [ -n "${WIRECHECK_ARGS:-}" ]; then
    read -r -a extra <<<"$WIRECHECK_ARGS"
fi

# 4. Run. A failing case is a result, not a setup error: keep the status, then exit with it.
as_root=()
if [ "${WIRECHECK_SUDO:-}" = 1 ] && [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "WIRECHECK_SUDO=1 needs sudo"
    # sudo resets PATH; the agent and the tools it calls are found as they are here.
    as_root=(sudo env "PATH=$PATH")
fi
echo "==> ${as_root[*]:+${as_root[0]} }wirecheck run ${agent[*]} --out $out ${extra[*]}" >&2
status=0
"${as_root[@]}" "$wirecheck" run "${agent[@]}" --out "$out" \
    --scenarios "$src/scenarios" --agents-dir "$src/conformance/agents" \
    --quiet "${extra[@]}" || status=$?
if [ "${#as_root[@]}" -gt 0 ] && [ -e "$out" ]; then
    # The results belong to the CI user again, for the steps after this one.
    sudo chown -R "$(id -u):$(id -g)" "$out" || die "cannot give $out back to $(id -un)"
fi

if [ "$status" -le 1 ]; then
    for file in results.json junit.xml report.html; do
        [ -f "$out/$file" ] || die "wirecheck exited $status but did not write $out/$file"
    done
    echo "==> results in $out/: results.json, junit.xml, report.html, artifacts/" >&2
fi

# One line for the GitHub Actions job summary (skipped elsewhere).
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$out/junit.xml" ]; then
    totals=$(sed -n 's/.*<testsuites[^>]* tests="\([0-9]*\)" failures="\([0-9]*\)".*/\1 cases, \2 failed/p' "$out/junit.xml" | head -n 1)
    echo "wirecheck: ${totals:-no totals}, exit status $status; report.html is in the wirecheck-results artifact" >>"$GITHUB_STEP_SUMMARY"
fi

exit "$status"
