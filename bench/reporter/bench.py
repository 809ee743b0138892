#!/usr/bin/env python3
"""Benchmark driver: wall time per process of `provision-report ready` against a loopback
server that answers at once, next to cloud-init's own Ready path (22.4.2,
`get_metadata_from_fabric`) against the same server in the same run.

Variants run round-robin so machine noise hits all of them alike. Prints a markdown table and
writes it, with the environment, to --results.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"

CLOUD_INIT_PROCESS = """
from cloudinit.sources.helpers.azure import get_metadata_from_fabric
get_metadata_from_fabric({endpoint!r})
"""

CLOUD_INIT_IN_PROCESS = """
import json, statistics, time
from cloudinit.sources.helpers.azure import get_metadata_from_fabric
times = []
for _ in range({runs}):
    started = time.perf_counter()
    get_metadata_from_fabric({endpoint!r})
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps(times))
"""


def start_server():
    server = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "server.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(server.stdout.readline())
    return server, port


def counts(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__counts") as answer:
        return json.load(answer)


def timed(command):
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        sys.exit(f"{command[0]} exited {done.returncode}: {done.stderr}")
    return elapsed


def summary(times):
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return statistics.median(ordered), p90, ordered[0]


def version(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--results")
    args = parser.parse_args()

    server, port = start_server()
    url = f"http://127.0.0.1:{port}"
    scratch = tempfile.mkdtemp(prefix="reporter-bench-")
    pool = os.path.join(scratch, ".kvp_pool_1")
    common = [args.binary, "--wireserver", url, "--kvp-pool", pool, "--log-level", "warn"]
    variants = [
        ("provision-report ready (JSON, IMDS + KVP)", common + ["--imds", url, "ready"]),
        (
            "provision-report ready (JSON, --no-imds --vm-id, KVP)",
            common + ["--no-imds", "--vm-id", "bench", "ready"],
        ),
        (
            "provision-report --protocol xml ready (--no-imds --vm-id, KVP)",
            common + ["--no-imds", "--vm-id", "bench", "--protocol", "xml", "ready"],
        ),
        (
            "cloud-init 22.4.2 get_metadata_from_fabric (python3 process)",
            [DEBIAN_PYTHON, "-c", CLOUD_INIT_PROCESS.format(endpoint=f"127.0.0.1:{port}")],
        ),
    ]
    times = {name: [] for name, _ in variants}
    try:
        for round_ in range(args.warmup + args.runs):
            for name, command in variants:
                elapsed = timed(command)
                if round_ >= args.warmup:
                    times[name].append(elapsed)
        in_process = subprocess.run(
            [
                DEBIAN_PYTHON,
                "-c",
                CLOUD_INIT_IN_PROCESS.format(endpoint=f"127.0.0.1:{port}", runs=args.runs),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        cloud_init_calls = json.loads(in_process.stdout.strip().splitlines()[-1])
        seen = counts(port)
    finally:
        server.terminate()
        server.wait()

    # Every run really reported: one health POST per run (plus warm-up).
    total = args.warmup + args.runs
    expected_json = 2 * total
    expected_xml = total + total + len(cloud_init_calls)
    if seen.get("POST /provisioning/health") != expected_json:
        sys.exit(f"expected {expected_json} JSON health POSTs, server saw {seen}")
    if seen.get("POST /machine?comp=health") != expected_xml:
        sys.exit(f"expected {expected_xml} XML health POSTs, server saw {seen}")

    rows = []
    for name, _ in variants:
        rows.append((name, "process", *summary(times[name])))
    rows.append(
        ("cloud-init 22.4.2 get_metadata_from_fabric (call only, import excluded)", "in-process", *summary(cloud_init_calls))
    )
    medians = {row[0]: row[2] for row in rows}
    xml_name = variants[2][0]
    json_name = variants[0][0]
    ci_process = variants[3][0]
    ci_call = rows[-1][0]

    lines = [
        "| variant | measured | median ms | p90 ms | min ms |",
        "|---|---|---:|---:|---:|",
    ]
    for name, kind, median, p90, low in rows:
        lines.append(f"| {name} | {kind} | {median:.2f} | {p90:.2f} | {low:.2f} |")
    lines.append("")
    lines.append(
        f"- cloud-init process / provision-report XML process (same Ready report, same server): "
        f"**{medians[ci_process] / medians[xml_name]:.1f}x**"
    )
    lines.append(
        f"- cloud-init call alone (interpreter and import excluded) / provision-report XML process: "
        f"**{medians[ci_call] / medians[xml_name]:.2f}x**"
    )
    lines.append(
        f"- target: median JSON ready under 10 ms per process: "
        f"**{'met' if medians[json_name] < 10 else 'NOT met'}** ({medians[json_name]:.2f} ms)"
    )
    table = "\n".join(lines)
    print(table)

    if args.results:
        environment = [
            f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M')}",
            f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()} (shared with other builds; medians, round-robin order)",
            f"- provision-report: {version([args.binary, '--version'])} (release build)",
            f"- cloud-init: {version(['dpkg-query', '-W', '-f', '${Version}', 'cloud-init'])} (Debian package), {version([DEBIAN_PYTHON, '--version'])}",
            f"- runs per variant: {args.runs} after {args.warmup} warm-up rounds",
        ]
        text = "\n".join(
            [
                "# reporter benchmark results",
                "",
                "Written by `bench/reporter/run.sh`: wall time per process of a Ready report against a",
                "loopback server (`server.py`) that answers at once (JSON 201, XML 200), next to",
                "cloud-init's own Ready path against the same server in the same run.",
                "",
                *environment,
                "",
                table,
                "",
                "What each variant does:",
                "",
                "- provision-report, JSON: `GET /metadata/instance` (first row only), KVP upsert into a",
                "  temporary pool, `POST /provisioning/health`.",
                "- provision-report, XML: KVP upsert, `GET /?comp=versions`, `GET /machine/?comp=goalstate`,",
                "  `POST /machine?comp=health`.",
                "- cloud-init 22.4.2 (`get_metadata_from_fabric(\"127.0.0.1:PORT\")`): `GET",
                "  /machine/?comp=goalstate`, `POST /machine?comp=health`; no versions request, no KVP.",
                "  The process row includes interpreter start-up and the import, as a systemd unit",
                "  running it would pay; the in-process row is the call alone.",
                "",
            ]
        )
        with open(args.results, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
