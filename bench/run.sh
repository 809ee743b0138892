#!/usr/bin/env bash
# wirecheck benchmarks: every figure measured side by side with its reference in one run, as
# ratios, written to bench/RESULTS.md (not part of the test command).
#
#   bench/run.sh                 # the full run (about 9 minutes on 2 cores, 4 of them the install
#                                # part's source build)
#   QUICK=1 bench/run.sh         # a dry run with tiny counts, written to target/bench-quick/RESULTS.md
#                                # (without the reporter part: its script rewrites bench/reporter/RESULTS.md;
#                                # without the install part: its source build takes minutes)
#   bench/run.sh --only imds     # one part: imds | footprint | kvp | suite | reporter | reliability | prop | install | matrix (repeatable;
#                                # matrix only when asked: root and the real agents; its record is
#                                # bench/MATRIX.md: bench/run.sh --only matrix --out bench/MATRIX.md)
#   bench/run.sh --only imds --baseline-fake /tmp/fake-before   # also measure an older build of the
#                                # fake in the same rounds (before/after a change of its connection path)
#   bench/run.sh --only suite --baseline-checkout /tmp/old   # also time an older checkout's suite
#                                # (a worktree with release binaries built), interleaved
#   bench/run.sh --fuzz-seconds 60   # also fuzz the oracle's cargo-fuzz targets, 60 s each
#                                    # (nightly + cargo-fuzz; runs last, after the figures)
#
# Extra arguments go to bench-run (`target/release/bench-run --help` lists the counts).
# Needs: wrk (Debian package, /usr/bin/wrk), Debian's python3 with the cloud-init package
# (for the references), a Rust toolchain. Run it on a quiet machine: the 1-minute load average
# is recorded in RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

only_without_imds=
case " $* " in *" --only "*) case " $* " in *" imds "*) ;; *) only_without_imds=1 ;; esac ;; esac
if [ -z "$only_without_imds" ] && [ ! -x /usr/bin/wrk ]; then
    echo "bench/run.sh: /usr/bin/wrk not found: apt-get install wrk" >&2
    exit 2
fi
if ! /usr/bin/python3 -c 'import cloudinit.reporting.handlers' 2>/dev/null; then
    echo "bench/run.sh: Debian's cloud-init package is missing: apt-get install cloud-init" >&2
    exit 2
fi

packages=(-p fake-wireserver-cli -p wirecheck -p reporter -p wirecheck-bench)
# The real-agent matrix also runs libazureinit's adapter (found next to wirecheck).
case " $* " in *" matrix "*|*"=matrix "*) packages+=(-p libazureinit-adapter) ;; esac
cargo build --release --bins "${packages[@]}"
# The agent clock preload, beside wirecheck: the matrix and the prop part's cloud-init 25.1
# schedules run scalable agents in agent time.
cargo build --release -p wirecheck-agent-clock
target_dir="${CARGO_TARGET_DIR:-target}"

if [ -n "${QUICK:-}" ]; then
    exec "${target_dir}/release/bench-run" --root . --invocation "QUICK=1 bench/run.sh $*" \
        --out "${target_dir}/bench-quick/RESULTS.md" \
        --wrk-seconds 1 --rounds 1 --startup-runs 3 --flood-requests 2000 \
        --kvp-records 2000 --kvp-runs 1 --suite-runs 1 --prop-cases 16 --prop-cases-cloud-init 8 \
        --prop-schedules 16 --prop-schedules-python 4 \
        --skip reporter --skip install "$@"
fi
exec "${target_dir}/release/bench-run" --root . --invocation "bench/run.sh $*" "$@"
