# A test agent with one planted bug: it writes cloud-init's encoded report (quote character ',
# whole field quoted when it holds |, ', CR or LF) but forgets to double a ' inside a quoted
# field. Everything else is right: JSON health flow, the 4096-byte trim, the exit status.
import argparse, datetime, json, sys, urllib.request

p = argparse.ArgumentParser()
p.add_argument("--wireserver", required=True)
p.add_argument("--vm-id", default="None")
p.add_argument("--reason", required=True)
p.add_argument("--data", action="append", default=[])
a = p.parse_args()

def field(key, value):
    text = f"{key}={value}"
    if any(c in text for c in "|'\r\n"):
        return "'" + text + "'"  # the bug: text.replace("'", "''") is missing
    return text

fields = [("result", "error"), ("reason", a.reason), ("agent", "misquoting/1.0"), ("pps_type", "None")]
fields += [tuple(d.split("=", 1)) for d in a.data]
stamp = datetime.datetime.now(datetime.timezone.utc).isoformat()
fields += [("vm_id", a.vm_id), ("timestamp", stamp),
           ("documentation_url", "https://aka.ms/linuxprovisioningerror")]
description = "|".join(field(k, v) for k, v in fields)
description = description.encode("utf-8")[:4096].decode("utf-8", "ignore")
body = json.dumps({"details": {"description": description, "subStatus": "ProvisioningFailed"},
                   "state": "NotReady"}).encode()
request = urllib.request.Request(
    a.wireserver + "/provisioning/health", data=body, method="POST",
    headers={"Content-Type": "application/json", "x-ms-guest-agent-name": "misquoting v1.0",
             "User-Agent": "misquoting v1.0"})
try:
    urllib.request.urlopen(request, timeout=5).read()
except Exception as e:
    print(e, file=sys.stderr)
    sys.exit(1)
