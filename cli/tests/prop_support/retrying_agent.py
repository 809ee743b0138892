# A test agent whose retry loop is right but for one planted bug, chosen with --bug (none: the
# loop is right). It reports Ready with the recommended policy (docs/protocol.md §8.2, as the
# bundled reporter): 2xx delivered (exit 0); 404, 410, 429, 500, 503 and transport errors
# retried after --retry-interval (Retry-After ignored); a 403 retried only with the platform's
# throttle body; anything else fatal (exit 1); no new attempt once --budget is spent. On the
# XML flow it fetches the goal state first, by the same policy (a 200 it cannot read fetched
# again), and again after every 410 (docs/protocol.md §4). The bugs are the report loop's.
#   third-503        gives up after the third 503
#   retry-after      honours a Retry-After whole, sleeping past its budget
#   throttle-fatal   treats a 403 with the throttle body as fatal
#   refetch-once     fetches the goal state again after the first 410 only
#   stale-incarnation  fetches the goal state again after a 410 but echoes the incarnation it
#                    read first (only a goal state that moved on shows it)
import argparse, sys, time, urllib.error, urllib.request
import xml.etree.ElementTree as ET

p = argparse.ArgumentParser()
p.add_argument("--wireserver", required=True)
p.add_argument("--budget", type=float, required=True)
p.add_argument("--retry-interval", type=float, required=True)
p.add_argument("--request-timeout", type=float, required=True)
p.add_argument("--protocol", default="json", choices=["json", "xml"])
p.add_argument("--bug", default="none",
               choices=["none", "third-503", "retry-after", "throttle-fatal", "refetch-once",
                        "stale-incarnation"])
a = p.parse_args()

RETRYABLE = {404, 410, 429, 500, 503}
start = time.monotonic()
unavailable = 0

HEALTH = ('<?xml version="1.0" encoding="utf-8"?><Health xmlns:xsi="http://www.w3.org/2001/'
          'XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"><GoalStateIncarnation>'
          '{incarnation}</GoalStateIncarnation><Container><ContainerId>{container}</ContainerId>'
          '<RoleInstanceList><Role><InstanceId>{instance}</InstanceId><Health><State>Ready</State>'
          '</Health></Role></RoleInstanceList></Container></Health>')
XML_HEADERS = {"x-ms-agent-name": "WALinuxAgent", "x-ms-version": "2012-11-30"}


def exchange(request):
    """(status, headers, body) of one attempt; status None for a transport error."""
    try:
        with urllib.request.urlopen(request, timeout=a.request_timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except Exception as e:  # refused, reset, closed, timed out
        print(f"transport error: {e}", file=sys.stderr)
        return None, {}, b""


def react(status, headers, body, report):
    """The wait before the next attempt after this answer; exits on a fatal one. The planted
    bugs are the report loop's (`report`): the goal state is fetched by the right policy."""
    global unavailable
    throttled = status == 403 and b"RequestRateLimitExceeded" in body
    if report and status == 503:
        unavailable += 1
        if a.bug == "third-503" and unavailable == 3:
            print("giving up after three 503s", file=sys.stderr)
            sys.exit(1)
    if report and throttled and a.bug == "throttle-fatal":
        print("403: fatal", file=sys.stderr)
        sys.exit(1)
    if status is not None and status not in RETRYABLE and not throttled:
        print(f"{status}: fatal", file=sys.stderr)
        sys.exit(1)
    wait = a.retry_interval
    retry_after = headers.get("Retry-After") if status is not None else None
    if report and a.bug == "retry-after" and retry_after and retry_after.isdigit():
        wait = max(wait, float(retry_after))
    return wait


def sleep_within_budget(wait):
    overrun = a.bug == "retry-after"
    left = a.budget - (time.monotonic() - start)
    if wait >= left and not overrun:
        print("budget spent, not reported", file=sys.stderr)
        sys.exit(1)
    time.sleep(wait)
    if time.monotonic() - start >= a.budget and not overrun:
        print("budget spent, not reported", file=sys.stderr)
        sys.exit(1)


def goal_state():
    """The goal state's values the health document echoes, fetched until it can be read (a 200
    that is not a whole goal state is fetched again)."""
    while True:
        status, headers, body = exchange(urllib.request.Request(
            a.wireserver + "/machine/?comp=goalstate", headers=XML_HEADERS))
        if status == 200:
            try:
                root = ET.fromstring(body)
                return {"incarnation": root.findtext("Incarnation"),
                        "container": root.findtext("Container/ContainerId"),
                        "instance": root.findtext("Container/RoleInstanceList/RoleInstance/InstanceId")}
            except ET.ParseError:
                print("unusable goal state", file=sys.stderr)
                wait = a.retry_interval
        else:
            wait = react(status, headers, body, report=False)
        sleep_within_budget(wait)


def post(gs):
    if a.protocol == "json":
        return exchange(urllib.request.Request(
            a.wireserver + "/provisioning/health", data=b'{"state":"Ready"}', method="POST",
            headers={"Content-Type": "application/json",
                     "x-ms-guest-agent-name": "retrying v1.0", "User-Agent": "retrying v1.0"}))
    return exchange(urllib.request.Request(
        a.wireserver + "/machine?comp=health", data=HEALTH.format(**gs).encode(), method="POST",
        headers={**XML_HEADERS, "Content-Type": "text/xml; charset=utf-8"}))


gs = None
gone = 0
first_incarnation = None
while True:
    if a.protocol == "xml" and gs is None:
        gs = goal_state()
        first_incarnation = first_incarnation or gs["incarnation"]
        if a.bug == "stale-incarnation":
            gs["incarnation"] = first_incarnation
    status, headers, body = post(gs)
    if status == 410:
        gone += 1
        if a.bug != "refetch-once" or gone == 1:
            gs = None
    if status is not None and 200 <= status < 300:
        sys.exit(0)
    sleep_within_budget(react(status, headers, body, report=True))
