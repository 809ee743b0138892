#!/usr/bin/python3
"""Drive cloud-init 26's own Azure code against a fake wireserver and IMDS.

Runs with Debian's /usr/bin/python3 and PYTHONPATH pointing at an unpacked
cloud-init 26.2 (scripts/install-agents.sh: target/agents/cloud-init-26.2/
usr/lib/python3/dist-packages). Nothing in cloud-init is patched: the driver
calls cloud-init's functions in the order DataSourceAzure calls them and only
chooses where they point to (endpoint, IMDS URL, KVP pool, DMI folder).

cloud-init-25-driver.py cannot drive 26.x: 26.1 moved the VM id out of the
reporting functions into DataSourceAzure (kvp.report_success_to_host(*, vm_id),
ReportableError.as_encoded_report(*, vm_id), report_failure_to_fabric(endpoint,
*, encoded_report); sources/azure/kvp.py:45, errors.py:53-71,
helpers/azure.py:952), so the caller reads the VM id and passes it, as
DataSourceAzure._query_vm_id does (DataSourceAzure.py:1114-1135).

    cloud-init-26-driver.py --endpoint 127.0.0.1:8080 --imds-url http://127.0.0.1:8081 \
        --kvp-pool DIR/.kvp_pool_1 --state-dir DIR [--vm-id ID] ready
    cloud-init-26-driver.py ... failure --reason TEXT [--data KEY=VALUE ...]

Both actions first fetch the instance document as DataSourceAzure.crawl_metadata
does: imds.fetch_metadata_with_api_fallback(retry_deadline=now + 300 s) with
imds.IMDS_URL set to --imds-url + "/metadata". An IMDS failure is printed and
the run goes on (DataSourceAzure goes on without IMDS data too).

  ready    DataSourceAzure._report_ready (DataSourceAzure.py:1510-1531):
           kvp.report_success_to_host(vm_id=vm_id) (the PROVISIONING_REPORT
           record), then get_metadata_from_fabric(endpoint, distro): goal state
           GET, then a Ready report.
  failure  DataSourceAzure._report_failure (DataSourceAzure.py:1441-1475):
           encoded = error.as_encoded_report(vm_id=vm_id), the "Azure
           datasource failure occurred" diagnostic event,
           kvp.report_via_kvp(encoded), then report_failure_to_fabric(endpoint,
           encoded_report=encoded). The error is cloud-init's own
           errors.ReportableError(reason, supporting_data={...}) built from
           --reason and the --data pairs in order.

experimental_skip_ready_report (26.2, DataSourceAzure.py:878-882) is not
driven: with it DataSourceAzure skips _report_ready entirely, so there is
nothing of cloud-init's to call.

The VM id. cloud-init 26 reads it from DMI, not IMDS: DataSourceAzure._query_vm_id
runs identity.query_system_uuid() (/sys/class/dmi/id/product_uuid) and
identity.convert_system_uuid_to_vm_id() (byte-swapped on a Gen1 VM, that is
one without /sys/firmware/efi); the driver calls the same two functions and
passes the result on, None when they raise (DataSourceAzure would report
"failure to identify Azure VM ID" instead, errors.py:241-247, a flow this driver
does not play). The KVP handler puts a VM id into every event key (26.1,
reporting/handlers.py:295-307): kvp.get_kvp_handler sets it from
identity.query_vm_id() (sources/azure/kvp.py:24-29) when the first record is
written, and until then the handler reads system-uuid itself
(handlers.py:261-275). The driver plays the VM's firmware: it points
cloudinit.dmi.DMI_SYS_PATH at <state-dir>/dmi and writes product_uuid there
for the VM id it is given (--vm-id, else IMDS compute.vmId), stored the way
the firmware of this VM's generation stores it (cloud-init's own
byte_swap_system_uuid, which is its own inverse, on Gen1). Without either, no
product_uuid is written and cloud-init reports "failed to read vm id: ...".
cloud-init reads no DMI in a container (util.is_container runs
`systemd-detect-virt --quiet --container` from PATH): the driver puts a
systemd-detect-virt that answers as on a Hyper-V VM first on PATH, so the run
does not depend on whether wirecheck itself runs in a container.

report_dmesg_to_kvp(), which DataSourceAzure calls before both reports, is
left out: it would copy this machine's kernel log into the pool.

KVP: cloud-init's HyperVKvpReportingHandler is registered under the name
"telemetry" (as Azure images configure it) with kvp_file_path = --kvp-pool.

Exit status: 0 when cloud-init's wireserver call returned, 1 when it raised
(the exception is printed), 2 on bad usage. The last stdout line is one JSON
object describing the outcome.
"""

import argparse
import json
import logging
import os
import sys
import traceback
import uuid
from time import monotonic

# DataSourceAzure.get_metadata_from_imds: retry_deadline = start + 300.
IMDS_RETRY_SECONDS = 300


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Run cloud-init 26's Azure reporting against a fake wireserver and IMDS."
    )
    parser.add_argument(
        "--endpoint",
        required=True,
        help='wireserver endpoint string as cloud-init takes it: "127.0.0.1:PORT"; an '
        '"http://" prefix and a trailing "/" are dropped, so a URL works too',
    )
    parser.add_argument(
        "--imds-url",
        required=True,
        help='IMDS base URL, e.g. "http://127.0.0.1:PORT" ("/metadata" is appended unless present)',
    )
    parser.add_argument(
        "--kvp-pool", required=True, help="pool file the telemetry (Hyper-V KVP) handler writes to"
    )
    parser.add_argument(
        "--state-dir", required=True, help="scratch folder (the DMI folder lives here)"
    )
    parser.add_argument("--vm-id", default=None, help="the VM's id (default: IMDS compute.vmId)")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("ready", help="PROVISIONING_REPORT success, then goal state and Ready")
    failure = sub.add_parser(
        "failure", help="PROVISIONING_REPORT error, then goal state and NotReady"
    )
    failure.add_argument("--reason", required=True, help="ReportableError reason")
    failure.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="supporting data, in order (split at the first '=')",
    )
    args = parser.parse_args(argv)
    if args.action == "failure":
        pairs = []
        for item in args.data:
            key, sep, value = item.partition("=")
            if not sep or not key:
                parser.error("--data %r: expected KEY=VALUE" % item)
            pairs.append((key, value))
        args.pairs = pairs
    return args


def endpoint_string(value):
    """cloud-init builds "http://{endpoint}/machine..." itself: keep only host[:port]."""
    if value.startswith("http://"):
        value = value[len("http://") :]
    return value.rstrip("/")


def imds_base(value):
    value = value.rstrip("/")
    return value if value.endswith("/metadata") else value + "/metadata"


def write_vm_probe(bin_dir):
    """systemd-detect-virt as it answers on an Azure VM: virtualization, but no container.

    cloud-init reads no DMI inside a container (dmi.read_dmi_data -> util.is_container ->
    `systemd-detect-virt --quiet --container`, found on PATH), and wirecheck may itself run in
    one: the driver's VM is a VM wherever it runs.
    """
    probe = os.path.join(bin_dir, "systemd-detect-virt")
    with open(probe, "w") as f:
        f.write(
            "#!/bin/sh\n"
            "# written by cloud-init-26-driver.py: the answers of a Hyper-V VM\n"
            'for a in "$@"; do [ "$a" = "--container" ] || [ "$a" = "-c" ] && { '
            '[ "$1" = "--quiet" ] || echo none; exit 1; }; done\n'
            '[ "$1" = "--quiet" ] || echo microsoft\n'
        )
    os.chmod(probe, 0o755)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")


def write_firmware_uuid(dmi_dir, vm_id, identity):
    """product_uuid as this VM's firmware stores it, so cloud-init reads back vm_id."""
    try:
        uuid.UUID(vm_id)
        is_uuid = True
    except ValueError:
        is_uuid = False  # stored as given: cloud-init's own reading decides what it makes of it
    stored = identity.byte_swap_system_uuid(vm_id) if is_uuid and identity.is_vm_gen1() else vm_id
    with open(os.path.join(dmi_dir, "product_uuid"), "w") as f:
        f.write(stored + "\n")


def main(argv):
    args = parse_args(argv)
    endpoint = endpoint_string(args.endpoint)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )

    # Imported after logging is set up so import-time messages are visible.
    from cloudinit import distros, dmi, helpers, reporting, version
    from cloudinit.sources.azure import errors, identity, imds, kvp
    from cloudinit.sources.helpers import azure

    state = os.path.abspath(args.state_dir)
    dmi_dir = os.path.join(state, "dmi")
    os.makedirs(dmi_dir, exist_ok=True)
    # Paths only: where the firmware's DMI files and IMDS are.
    dmi.DMI_SYS_PATH = dmi_dir
    bin_dir = os.path.join(state, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    write_vm_probe(bin_dir)
    imds.IMDS_URL = imds_base(args.imds_url)

    reporting.update_configuration(
        {"telemetry": {"type": "hyperv", "kvp_file_path": args.kvp_pool}}
    )

    outcome = {
        "agent": "cloud-init",
        "version": version.version_string(),
        "action": args.action,
        "endpoint": endpoint,
        "imds": imds.IMDS_URL,
    }
    status = 0
    try:
        vm_id = args.vm_id
        try:
            metadata = imds.fetch_metadata_with_api_fallback(
                retry_deadline=monotonic() + IMDS_RETRY_SECONDS
            )
            outcome["imds_result"] = "ok"
            vm_id = vm_id or metadata.get("compute", {}).get("vmId")
        except Exception as error:  # cloud-init's own IMDS failure; it goes on without
            traceback.print_exc(file=sys.stderr)
            outcome["imds_result"] = "%s: %s" % (type(error).__name__, error)
        if vm_id:
            write_firmware_uuid(dmi_dir, vm_id, identity)
        # DataSourceAzure._query_vm_id: cloud-init's own reading of the firmware.
        try:
            vm_id = identity.convert_system_uuid_to_vm_id(identity.query_system_uuid())
        except (RuntimeError, ValueError) as error:
            traceback.print_exc(file=sys.stderr)
            outcome["vm_id_error"] = "%s: %s" % (type(error).__name__, error)
            vm_id = None
        outcome["vm_id"] = vm_id

        if args.action == "ready":
            outcome["kvp"] = kvp.report_success_to_host(vm_id=vm_id)
            paths = helpers.Paths({"cloud_dir": state, "run_dir": state})
            distro = distros.fetch("debian")("debian", {}, paths)
            azure.get_metadata_from_fabric(endpoint=endpoint, distro=distro)
        else:
            error = errors.ReportableError(args.reason, supporting_data=dict(args.pairs))
            encoded = error.as_encoded_report(vm_id=vm_id)
            azure.report_diagnostic_event(
                f"Azure datasource failure occurred: {encoded}",
                logger_func=logging.getLogger("cloudinit.sources.DataSourceAzure").error,
            )
            outcome["kvp"] = kvp.report_via_kvp(encoded)
            azure.report_failure_to_fabric(endpoint=endpoint, encoded_report=encoded)
        outcome["result"] = "ok"
    except Exception as error:  # cloud-init's own failure, reported as such
        traceback.print_exc(file=sys.stderr)
        outcome["result"] = "error"
        outcome["error"] = "%s: %s" % (type(error).__name__, error)
        status = 1
    finally:
        # The KVP handler writes events from a background thread; wait for it.
        reporting.flush_events()

    print(json.dumps(outcome), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
