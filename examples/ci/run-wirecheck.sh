#!/usr/bin/env bash
# run-wirecheck.sh: run the wirecheck conformance suite against your provisioning agent.
#
# Copy this file into your project (for example ci/run-wirecheck.sh) and call it from any CI.
# It installs wirecheck (unless WIRECHECK_BIN names one), runs it against your agent, and leaves
# results.json, junit.xml and report.html in WIRECHECK_OUT for your CI to keep as artifacts.
#
# Exit status is wirecheck's: 0 every case passed (non-strict allowed unless --strict),
# 1 a case failed, 2 wirecheck could not run (bad flags, bad profile), 3 this script's setup failed.
#
# Configuration (environment):
#   WIRECHECK_AGENT_CMD  how to start your agent for one case: a command template, e.g.
#                          'target/release/my-agent {action} --wireserver {wireserver_url} --imds {imds_url}'
#                        (`wirecheck run --help` lists the placeholders)
#   WIRECHECK_AGENT      or: an agent profile (a TOML file, or the name of a bundled profile)
#   WIRECHECK_OUT        results folder (default: wirecheck-results)
#   WIRECHECK_ARGS       extra flags for `wirecheck run`, split on whitespace, never globbed,
#                        e.g. '--strict --cases wire.*'
#   WIRECHECK_BIN        use this wirecheck binary instead of installing one
#   WIRECHECK_GIT        git URL of wirecheck to install from (needed unless WIRECHECK_BIN is set)
#   WIRECHECK_REV        commit or tag to install (default: the repository's default branch)
#   WIRECHECK_ROOT       install root for cargo install (default: .wirecheck; cache it in CI)
set -euo pipefail

die() {
    echo "run-wirecheck.sh: $*" >&2
    exit 3
}

out="${WIRECHECK_OUT:-wirecheck-results}"

# 1. wirecheck itself.
if [ -n "${WIRECHECK_BIN:-}" ]; then
    wirecheck="$WIRECHECK_BIN"
    [ -x "$wirecheck" ] || die "WIRECHECK_BIN=$wirecheck is not an executable file"
else
    [ -n "${WIRECHECK_GIT:-}" ] || die "set WIRECHECK_GIT to the wirecheck repository URL (or WIRECHECK_BIN to a wirecheck binary)"
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to install wirecheck (https://rustup.rs), or set WIRECHECK_BIN"
    root="${WIRECHECK_ROOT:-.wirecheck}"
    rev=()
    [ -n "${WIRECHECK_REV:-}" ] && rev=(--rev "$WIRECHECK_REV")
    # Both binaries: `wirecheck`, and `fake-wireserver` for agents attached in a network namespace.
    # cargo install is a no-op when the same revision is already installed in $root.
    echo "==> installing wirecheck from $WIRECHECK_GIT ${WIRECHECK_REV:-}" >&2
    cargo install --locked --root "$root" --git "$WIRECHECK_GIT" "${rev[@]}" conformance fake-wireserver \
        || die "cargo install from $WIRECHECK_GIT failed"
    wirecheck="$root/bin/wirecheck"
    export PATH="$root/bin:$PATH"
fi

# 2. The agent under test.
agent=()
if [ -n "${WIRECHECK_AGENT_CMD:-}" ]; then
    agent=(--agent-cmd "$WIRECHECK_AGENT_CMD")
elif [ -n "${WIRECHECK_AGENT:-}" ]; then
    agent=(--agent "$WIRECHECK_AGENT")
else
    die "set WIRECHECK_AGENT_CMD (a command template) or WIRECHECK_AGENT (a profile)"
fi

extra=()
[ -n "${WIRECHECK_ARGS:-}" ] && read -r -a extra <<<"$WIRECHECK_ARGS"

# 3. Run. A failing case is a result, not a setup error: keep the status, report, then exit with it.
echo "==> $wirecheck run ${agent[*]} --out $out ${extra[*]}" >&2
status=0
"$wirecheck" run "${agent[@]}" --out "$out" "${extra[@]}" || status=$?

for file in results.json junit.xml report.html; do
    if [ -f "$out/$file" ]; then
        echo "    $out/$file" >&2
    elif [ "$status" -le 1 ]; then
        # wirecheck ran to the end but a result file is missing: that is a setup problem.
        die "wirecheck exited $status but did not write $out/$file"
    fi
done

# A line for the GitHub Actions job summary (harmless elsewhere).
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$out/junit.xml" ]; then
    totals=$(sed -n 's/.*<testsuites[^>]* tests="\([0-9]*\)" failures="\([0-9]*\)".*/\1 cases, \2 failed/p' "$out/junit.xml" | head -n 1)
    echo "wirecheck: ${totals:-no totals}; exit $status (report.html is in the wirecheck-results artifact)" >>"$GITHUB_STEP_SUMMARY"
fi

exit "$status"
