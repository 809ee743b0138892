# A test agent whose retry loop is right but for one planted bug, chosen with --bug (none: the
# loop is right). It reports Ready on the JSON flow with the recommended policy (docs/protocol.md
# §8.2, as the bundled reporter): 2xx delivered (exit 0); 404, 410, 429, 500, 503 and transport
# errors retried after --retry-interval (Retry-After ignored); a 403 retried only with the
# platform's throttle body; anything else fatal (exit 1); no new attempt once --budget is spent.
#   third-503        gives up after the third 503
#   retry-after      honours a Retry-After whole, sleeping past its budget
#   throttle-fatal   treats a 403 with the throttle body as fatal
import argparse, sys, time, urllib.error, urllib.request

p = argparse.ArgumentParser()
p.add_argument("--wireserver", required=True)
p.add_argument("--budget", type=float, required=True)
p.add_argument("--retry-interval", type=float, required=True)
p.add_argument("--request-timeout", type=float, required=True)
p.add_argument("--bug", default="none", choices=["none", "third-503", "retry-after", "throttle-fatal"])
a = p.parse_args()

RETRYABLE = {404, 410, 429, 500, 503}
start = time.monotonic()
unavailable = 0

def post():
    """(status, headers, body) of one attempt; status None for a transport error."""
    request = urllib.request.Request(
        a.wireserver + "/provisioning/health", data=b'{"state":"Ready"}', method="POST",
        headers={"Content-Type": "application/json", "x-ms-guest-agent-name": "retrying v1.0",
                 "User-Agent": "retrying v1.0"})
    try:
        with urllib.request.urlopen(request, timeout=a.request_timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except Exception as e:  # refused, reset, closed, timed out
        print(f"transport error: {e}", file=sys.stderr)
        return None, {}, b""

while True:
    status, headers, body = post()
    if status is not None and 200 <= status < 300:
        sys.exit(0)
    throttled = status == 403 and b"RequestRateLimitExceeded" in body
    if status == 503:
        unavailable += 1
        if a.bug == "third-503" and unavailable == 3:
            print("giving up after three 503s", file=sys.stderr)
            sys.exit(1)
    if throttled and a.bug == "throttle-fatal":
        print("403: fatal", file=sys.stderr)
        sys.exit(1)
    if status is not None and status not in RETRYABLE and not throttled:
        print(f"{status}: fatal", file=sys.stderr)
        sys.exit(1)
    wait = a.retry_interval
    retry_after = headers.get("Retry-After") if status is not None else None
    if a.bug == "retry-after" and retry_after and retry_after.isdigit():
        wait = max(wait, float(retry_after))
    left = a.budget - (time.monotonic() - start)
    if wait >= left and a.bug != "retry-after":
        print("budget spent, not reported", file=sys.stderr)
        sys.exit(1)
    time.sleep(wait)
    if time.monotonic() - start >= a.budget and a.bug != "retry-after":
        print("budget spent, not reported", file=sys.stderr)
        sys.exit(1)
