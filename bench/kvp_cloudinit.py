#!/usr/bin/python3
"""The reference for the `wirecheck kvp dump` figure: read a KVP pool file with cloud-init's own
reader, HyperVKvpReportingHandler._iterate_kvps (flock, 2560-byte reads, _decode_kvp_item per
record), from Debian's cloud-init package.

    /usr/bin/python3 kvp_cloudinit.py POOL

Prints one JSON line: the record count and the seconds spent in the read alone (interpreter
start-up and the import excluded; the caller times the whole process).
"""

import json
import sys
import time

from cloudinit.reporting.handlers import HyperVKvpReportingHandler


def main() -> int:
    path = sys.argv[1]
    # The constructor would truncate a stale pool and start the publishing thread; reading
    # needs neither, so the handler is made without it and pointed at the file.
    handler = HyperVKvpReportingHandler.__new__(HyperVKvpReportingHandler)
    handler._kvp_file_path = path
    started = time.perf_counter()
    records = list(handler._iterate_kvps(0))
    elapsed = time.perf_counter() - started
    reports = sum(1 for r in records if r["key"] == "PROVISIONING_REPORT")
    print(json.dumps({"records": len(records), "provisioning_reports": reports, "read_s": elapsed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
