#!/usr/bin/python3
"""Drive cloud-init's own Azure wireserver code against a fake wireserver.

Runs with Debian's /usr/bin/python3, which has the `cloudinit` package of the
installed cloud-init (22.4.2 on Debian 12). Nothing in cloud-init is patched:
the driver calls cloud-init's public functions exactly as DataSourceAzure does
and only chooses where they point to.

    cloud-init-driver.py --endpoint 127.0.0.1:8080 --kvp-pool DIR/.kvp_pool_1 \
        --state-dir DIR ready
    cloud-init-driver.py --endpoint 168.63.129.16 --kvp-pool ... --state-dir ... \
        failure --description "text"

  ready    get_metadata_from_fabric(endpoint): goal state GET, then a Ready report.
  failure  report_failure_to_fabric(endpoint, description=...): goal state GET,
           then NotReady/ProvisioningFailed with the description (the
           agent's default description when none is given).

The endpoint is cloud-init's own endpoint string ("host" or "host:port"). To
go through an HTTP proxy, set http_proxy in the environment (requests honours
it) and use the real address 168.63.129.16 as endpoint; run that inside a
network namespace of your own so nothing can leave the machine.

KVP: cloud-init's HyperVKvpReportingHandler is registered under the name
"telemetry" (as Azure images configure it) with kvp_file_path = --kvp-pool, so
its events land in that pool file and can be judged like a real pool.

Exit status: 0 when cloud-init's call returned, 1 when it raised (the
exception is printed), 2 on bad usage. The last stdout line is one JSON object
describing the outcome.
"""

import argparse
import json
import logging
import os
import sys
import traceback


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Run cloud-init's Azure fabric calls against a fake wireserver."
    )
    parser.add_argument(
        "--endpoint",
        required=True,
        help='wireserver endpoint string as cloud-init takes it: "127.0.0.1:PORT" '
        'or "168.63.129.16" (with http_proxy); an "http://" prefix and a trailing "/" '
        "are dropped, so a URL works too",
    )
    parser.add_argument(
        "--kvp-pool",
        required=True,
        help="pool file the telemetry (Hyper-V KVP) handler writes to",
    )
    parser.add_argument(
        "--state-dir",
        required=True,
        help="folder for cloud-init's run-time state files (instead of /run/cloud-init)",
    )
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("ready", help="get_metadata_from_fabric: goal state, then Ready")
    failure = sub.add_parser(
        "failure", help="report_failure_to_fabric: goal state, then NotReady"
    )
    failure.add_argument(
        "--description",
        default=None,
        help="failure description (default: cloud-init's own default text)",
    )
    return parser.parse_args(argv)


def endpoint_string(value):
    """cloud-init builds "http://{endpoint}/machine..." itself: keep only host[:port]."""
    if value.startswith("http://"):
        value = value[len("http://") :]
    return value.rstrip("/")


def main(argv):
    args = parse_args(argv)
    endpoint = endpoint_string(args.endpoint)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )

    # Imported after logging is set up so import-time messages are visible.
    from cloudinit import reporting, version
    from cloudinit.sources.helpers import azure

    os.makedirs(args.state_dir, exist_ok=True)
    # push_log_to_kvp() (called before every health POST) records how much of
    # cloud-init.log it already sent in /run/cloud-init; keep that file out of
    # the host's /run. This is a path, not behaviour: the call sequence is
    # cloud-init's own.
    azure.LOG_PUSHED_TO_KVP_INDEX_FILE = os.path.join(
        args.state_dir, "log_pushed_to_kvp_index"
    )

    reporting.update_configuration(
        {"telemetry": {"type": "hyperv", "kvp_file_path": args.kvp_pool}}
    )

    outcome = {
        "agent": "cloud-init",
        "version": version.version_string(),
        "action": args.action,
        "endpoint": endpoint,
        "proxy": os.environ.get("http_proxy") or os.environ.get("HTTP_PROXY"),
    }
    status = 0
    try:
        if args.action == "ready":
            azure.get_metadata_from_fabric(endpoint)
        else:
            azure.report_failure_to_fabric(endpoint, description=args.description)
        outcome["result"] = "ok"
    except Exception as error:  # cloud-init's own failure, reported as such
        traceback.print_exc(file=sys.stderr)
        outcome["result"] = "error"
        outcome["error"] = "%s: %s" % (type(error).__name__, error)
        status = 1
    finally:
        # The KVP handler writes from a background thread; wait for it.
        reporting.flush_events()

    print(json.dumps(outcome), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
