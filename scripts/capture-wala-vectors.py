#!/usr/bin/env python3
"""Captures WALinuxAgent's requests as request vectors (testdata/vectors/http/walinuxagent-*/).

Each run is WALA's daemon, unmodified, in `fake-wireserver sandbox` (root) through
conformance/agents/walinuxagent-launcher.sh, against the vectors' fixed fake values
(scenarios/examples/vectors-fixed-values.toml) plus one fault. The fake's journal becomes one
vector per request, with the `expected` classification testdata/vectors/README.md describes
(`fake_responded` marks the request the fake answered with a scripted error status).

    sudo python3 scripts/capture-wala-vectors.py [--agent VERSION] [--only RUN]

Needs `cargo build --workspace --bins` and scripts/install-agents.sh first. Takes about two
minutes (the 500 run waits WALA's 30 s backoff, the no-IMDS run its 31 s of IMDS retries).
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAKE = ROOT / "target/debug/fake-wireserver"
LAUNCHER = ROOT / "conformance/agents/walinuxagent-launcher.sh"
FIXED = (ROOT / "scenarios/examples/vectors-fixed-values.toml").read_text()
OUT = ROOT / "testdata/vectors/http"

AGENTS = [("2.7.3", "2.7.3.0"), ("2.12", "2.12.0.2"), ("2.16", "2.16.0.2")]


def step(endpoint, status, times=1):
    return (
        f'\n[[endpoint]]\nid = "{endpoint}"\nend = "default"\n'
        f'[[endpoint.step]]\nkind = "respond"\nstatus = {status}\ntimes = {times}\n'
    )


# name, launcher mode, extra scenario TOML, timeout, which requests become vectors, description;
# the sandbox stops the daemon 1 s after its report, except for no-imds (its IMDS GET comes
# after the report, the wireserver fallback ~31 s later). 2.16 in cloud-init mode
# (in-progress-ready, failure) sends no report at all (pa/provision/cloudinit.py:43-64): those
# runs end at their timeout, and their vectors are the requests it does send.
RUNS = [
    ("ready", "ready", "", 30, "all", "Provisioning.Agent=disabled: Ready"),
    ("in-progress-ready", "provisioning", "", 30, "all",
     "Provisioning.Agent=cloud-init with ovf-env.xml and an ssh host key: NotReady/Provisioning, then Ready (2.16: no report)"),
    ("failure", "failure", "", 30, "all",
     "Provisioning.Agent=cloud-init with an ovf-env.xml without HostName: NotReady/ProvisioningFailed (2.16: no report)"),
    ("health-403", "ready", step("wireserver.health.xml", 403), 30, "health",
     "the first health POST answered 403 (throttling: retried 1 s later)"),
    ("health-410", "ready", step("wireserver.health.xml", 410), 15, "health",
     "the first health POST answered 410 (ResourceGoneError: not retried)"),
    ("health-500", "ready", step("wireserver.health.xml", 500), 60, "health",
     "the first health POST answered 500 (retried after the Fibonacci x 15 s backoff)"),
    ("health-503", "ready", step("wireserver.health.xml", 503), 30, "health",
     "the first health POST answered 503 (throttling: retried 1 s later)"),
    ("no-imds", "ready",
     '\n[[endpoint]]\nid = "imds.instance"\nend = "repeat-last"\n[[endpoint.step]]\nkind = "reset"\n',
     75, "imds",
     "every IMDS connection reset: WALA retries, then asks the wireserver's /metadata"),
]


def expected(entry, forced):
    exp = {"endpoint": entry["endpoint"]}
    target = entry["target"]
    query = target.split("?", 1)[1] if "?" in target else ""
    pairs = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in query.split("&") if p]
    if entry["endpoint"].startswith("wireserver.config"):
        exp["type"] = dict(pairs).get("type")
    report = entry.get("report")
    if report is not None:
        for key in ["goal_state_incarnation", "container_id", "instance_id", "state", "substatus", "description"]:
            exp[key] = report.get(key)
    if entry["endpoint"] == "imds.instance" or entry["endpoint"] == "wireserver.metadata":
        path = target.split("?", 1)[0]
        if entry["endpoint"] == "imds.instance":
            exp["imds_path"] = path
            exp["api_version"] = dict(pairs).get("api-version")
            exp["query"] = [list(p) for p in pairs]
            exp["metadata_header"] = next(
                (v for k, v in entry["headers"] if k.lower() == "metadata"), None)
    if forced:
        exp["fake_responded"] = entry["answer"]["status"]
    return exp


def keep(entry, which):
    if which == "all":
        return True
    if which == "health":
        return entry["endpoint"] == "wireserver.health.xml"
    if which == "imds":
        return entry["endpoint"] in ("imds.instance", "wireserver.metadata")
    return False


def capture(dir_name, version, run, counter):
    name, mode, extra, timeout, which, what = run
    root = ROOT / "target/agents" / f"walinuxagent-{dir_name}"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "log").mkdir()
        scenario = tmp / "scenario.toml"
        scenario.write_text(FIXED + extra)
        out = tmp / "out"
        subprocess.run(
            [str(FAKE), "sandbox", "--scenario", str(scenario), "--out", str(out),
             "--bind", f"{tmp / 'log'}:/var/log",
             "--stop-after-report", "60" if name == "no-imds" else "1",
             "--timeout", str(timeout), "--",
             str(LAUNCHER), str(root), str(tmp / "case"), mode],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        entries = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines() if line]
    written = []
    for e in entries:
        if not keep(e, which):
            continue
        forced = e["answer"]["kind"] == "respond"
        if e["answer"]["kind"] not in ("default", "respond"):
            continue  # a reset has no response to classify
        counter[0] += 1
        endpoint_slug = e["endpoint"].replace(".", "-")
        vector = {
            "kind": "request",
            "agent": "walinuxagent",
            "agent_version": version,
            "description": f"waagent -daemon {version}, {what}: {e['endpoint']} request",
            "method": e["method"],
            "target": e["target"],
            "http_version": e["http_version"],
            "headers": [[k, v] for k, v in e["headers"]],
            "body": e["body"],
        }
        if e.get("body_b64"):
            vector["body_b64"] = e["body_b64"]
        vector["expected"] = expected(e, forced)
        path = OUT / f"walinuxagent-{version}" / f"{counter[0]:02d}-{name}-{endpoint_slug}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(vector, indent=2, ensure_ascii=False) + "\n")
        written.append(path.name)
    return written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="capture only this run")
    ap.add_argument("--agent", help="capture only this version (e.g. 2.16.0.2)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (fake-wireserver sandbox)")
    for dir_name, version in AGENTS:
        if args.agent and version != args.agent:
            continue
        target = OUT / f"walinuxagent-{version}"
        if args.only is None and target.exists():
            shutil.rmtree(target)
        counter = [len(list(target.glob("*.json"))) if target.exists() else 0]
        for run in RUNS:
            if args.only and run[0] != args.only:
                continue
            written = capture(dir_name, version, run, counter)
            print(f"walinuxagent {version} {run[0]}: {len(written)} vectors")


if __name__ == "__main__":
    main()
