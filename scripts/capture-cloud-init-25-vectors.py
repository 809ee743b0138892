#!/usr/bin/python3
"""Capture testdata/vectors from cloud-init 25.1.4 or 26.2 (unpacked by scripts/install-agents.sh).

Runs conformance/agents/cloud-init-25-driver.py (26.2: cloud-init-26-driver.py; cloud-init's own
code, unmodified) in
`fake-wireserver sandbox` with scenarios/examples/vectors-fixed-values.toml: the fake answers
on 168.63.129.16 and 169.254.169.254 inside a private network namespace, as the recording
fake of testdata/vectors did. Writes, in the layout of testdata/vectors/README.md:

  http/cloud-init-<version>/NN-<run>-<request>.json   every request of each run
  kvp/cloud-init-<version>-<run>.bin + .json          the run's pool file and its sidecar
  reports/cloud-init-<version>-<name>.json            the PROVISIONING_REPORT values
                                                      (name: basic; 26.2: driver, since
                                                      cloud-init-26.2-basic.json is another
                                                      capture's)

Needs root (the sandbox) and a built fake-wireserver (cargo build --workspace --bins).

    sudo python3 scripts/capture-cloud-init-25-vectors.py [--version 25.1.4|26.2] [--out testdata/vectors]

Timestamps, UUIDs and KVP incarnations differ on every capture.
"""

import argparse
import base64
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = "cloud-init"
VM_ID = "11111111-2222-3333-4444-555555555555"
# version -> (unpacked tree, driver, name of the reports file)
VERSIONS = {
    "25.1.4": ("cloud-init-25.1.4", "cloud-init-25-driver.py", "basic"),
    "26.2": ("cloud-init-26.2", "cloud-init-26-driver.py", "driver"),
}
VERSION = "25.1.4"
PYTHONPATH = ""
DRIVER = ""
FAKE = os.path.join(ROOT, "target/debug/fake-wireserver")
FIXED = os.path.join(ROOT, "scenarios/examples/vectors-fixed-values.toml")
RECORD, KEY = 2560, 512
# File name parts, as in http/cloud-init-22.4.2/.
SHORT_NAMES = {
    "wireserver.goalstate": "goalstate",
    "wireserver.health.xml": "health",
    "imds.instance": "imds-instance",
}

# (run name, description, driver action arguments)
RUNS = [
    ("ready", "IMDS, then PROVISIONING_REPORT success, goal state GET, health Ready POST", ["ready"]),
    (
        "failure-tricky",
        "IMDS, then PROVISIONING_REPORT error, goal state GET, health NotReady POST; a reason "
        "and data with | ' \" = & < > tab, backslash and non-ASCII",
        [
            "failure",
            "--reason=can't open \"/etc/x.conf\" | a=b & <c> tab\tback\\slash café ✓",
            "--data=pipe=a|b",
            "--data=quotes=he said \"hi\" and 'bye'",
            "--data=unicode=Grüße €",
        ],
    ),
]


def run_sandbox(out_dir, action):
    pool = os.path.join(out_dir, "kvp_pool_1")
    state = os.path.join(out_dir, "state")
    command = [
        "/usr/bin/env", "PYTHONPATH=" + PYTHONPATH, "/usr/bin/python3", DRIVER,
        "--endpoint=168.63.129.16", "--imds-url=http://169.254.169.254",
        "--kvp-pool=" + pool, "--state-dir=" + state, "--vm-id=" + VM_ID,
    ] + action
    proc = subprocess.run(
        [FAKE, "sandbox", "--scenario", FIXED, "--out", os.path.join(out_dir, "sandbox"),
         "--timeout", "60", "--"] + command,
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        sys.exit("capture run failed (%d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    with open(os.path.join(out_dir, "sandbox", "journal.jsonl")) as f:
        journal = [json.loads(line) for line in f if line.strip()]
    with open(pool, "rb") as f:
        return journal, f.read()


def parse_report(encoded):
    """The csv reading of testdata/vectors/README.md ("Report dialects"), cloud-init quote."""
    row = next(csv.reader(io.StringIO(encoded), delimiter="|", quotechar="'"))
    return [list(field.split("=", 1)) for field in row]


def expected_for(entry):
    endpoint = entry["endpoint"]
    expected = {"endpoint": endpoint}
    if endpoint == "wireserver.health.xml":
        report = entry["report"]
        expected.update({
            "goal_state_incarnation": report["goal_state_incarnation"],
            "container_id": report["container_id"],
            "instance_id": report["instance_id"],
            "state": report["state"],
            "substatus": report["substatus"],
            "description": report["description"],
        })
        if (report["description"] or "").startswith("result="):
            expected["report"] = {
                "dialect": "cloud-init",
                "fields": parse_report(report["description"]),
            }
    elif endpoint.startswith("imds."):
        target = urllib.parse.urlsplit(entry["target"])
        query = urllib.parse.parse_qsl(target.query, keep_blank_values=True)
        headers = {k.lower(): v for k, v in entry["headers"]}
        expected.update({
            "imds_path": target.path,
            "api_version": dict(query).get("api-version"),
            "query": [list(p) for p in query],
            "metadata_header": headers.get("metadata"),
        })
    return expected


def request_vector(entry, description):
    vector = {
        "kind": "request",
        "agent": AGENT,
        "agent_version": VERSION,
        "description": description,
        "method": entry["method"],
        "target": entry["target"],
        "http_version": entry["http_version"],
        "headers": entry["headers"],
        "body": entry["body"],
    }
    if entry.get("body_b64"):
        vector["body_b64"] = entry["body_b64"]
    vector["expected"] = expected_for(entry)
    return vector


def pool_sidecar(pool, description):
    records = []
    for index in range(len(pool) // RECORD):
        raw = pool[index * RECORD:(index + 1) * RECORD]
        key = raw[:KEY].split(b"\0", 1)[0].decode()
        value_bytes = raw[KEY:].split(b"\0", 1)[0]
        value = value_bytes.decode()
        record = {"index": index, "key": key, "value": value, "value_bytes": len(value_bytes)}
        if key == "PROVISIONING_REPORT":
            record["report"] = {"dialect": "cloud-init", "fields": parse_report(value)}
        else:
            event = json.loads(value)
            if "msg_i" in event:
                raise SystemExit("split events are not captured by this script: " + key)
            record["event"] = event
        records.append(record)
    return {
        "agent": AGENT,
        "agent_version": VERSION,
        "description": description,
        "record_size": RECORD,
        "key_size": KEY,
        "value_size": RECORD - KEY,
        "records": records,
        "split_events": [],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "testdata/vectors"))
    parser.add_argument("--version", default="25.1.4", choices=sorted(VERSIONS))
    args = parser.parse_args()
    global VERSION, PYTHONPATH, DRIVER
    VERSION = args.version
    tree, driver, reports_name = VERSIONS[VERSION]
    PYTHONPATH = os.path.join(ROOT, "target/agents", tree, "usr/lib/python3/dist-packages")
    DRIVER = os.path.join(ROOT, "conformance/agents", driver)
    http_dir = os.path.join(args.out, "http", "%s-%s" % (AGENT, VERSION))
    os.makedirs(http_dir, exist_ok=True)
    n = 0
    reports = []
    for name, description, action in RUNS:
        with tempfile.TemporaryDirectory() as tmp:
            journal, pool = run_sandbox(tmp, action)
        for entry in journal:
            n += 1
            short = SHORT_NAMES.get(entry["endpoint"], entry["endpoint"].replace(".", "-"))
            path = os.path.join(http_dir, "%02d-%s-%s.json" % (n, name, short))
            with open(path, "w") as f:
                json.dump(request_vector(entry, "%s [%s]" % (description, short)), f,
                          indent=1, ensure_ascii=False)
                f.write("\n")
        base = os.path.join(args.out, "kvp", "%s-%s-%s" % (AGENT, VERSION, name))
        with open(base + ".bin", "wb") as f:
            f.write(pool)
        sidecar = pool_sidecar(pool, description)
        with open(base + ".json", "w") as f:
            json.dump(sidecar, f, indent=1, ensure_ascii=False)
            f.write("\n")
        for record in sidecar["records"]:
            if record["key"] == "PROVISIONING_REPORT":
                producer = ("cloudinit.sources.azure.kvp.report_success_to_host" if name == "ready"
                            else "cloudinit.sources.azure.errors.ReportableError.as_encoded_report")
                if VERSION != "25.1.4":
                    producer += "(vm_id=...)"
                reports.append({
                    "name": name,
                    "dialect": "cloud-init",
                    "encoded": record["value"],
                    "fields": record["report"]["fields"],
                    "produced_by": producer,
                    "note": "read back from the KVP PROVISIONING_REPORT record (%s run)" % name,
                })
    with open(os.path.join(args.out, "reports", "%s-%s-%s.json" % (AGENT, VERSION, reports_name)), "w") as f:
        json.dump(reports, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("%d request vectors, %d pools, %d reports" % (n, len(RUNS), len(reports)))


if __name__ == "__main__":
    main()
