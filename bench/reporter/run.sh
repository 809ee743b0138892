#!/usr/bin/env bash
# Benchmark: `provision-report ready` (release build) against a loopback server that answers at
# once, next to cloud-init's own Ready path (Debian cloud-init, get_metadata_from_fabric) against
# the same server in the same run. Prints a markdown table and writes bench/reporter/RESULTS.md.
#
#   bench/reporter/run.sh            # 50 runs per variant
#   RUNS=200 bench/reporter/run.sh
set -euo pipefail

cd "$(dirname "$0")/../.."
DEBIAN_PYTHON=/usr/bin/python3   # the Debian package's interpreter, not a pyenv one

if ! "$DEBIAN_PYTHON" -c 'import cloudinit.sources.helpers.azure' 2>/dev/null; then
    echo "installing the Debian cloud-init package (needs root)" >&2
    apt-get update
    apt-get install -y --no-install-recommends cloud-init
fi

cargo build --release -p reporter
binary="${CARGO_TARGET_DIR:-target}/release/provision-report"

"$DEBIAN_PYTHON" bench/reporter/bench.py \
    --binary "$binary" \
    --runs "${RUNS:-50}" \
    --results bench/reporter/RESULTS.md
