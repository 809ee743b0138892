# A hostile test agent (issue 23, "quadratic XML parsing"): instead of reporting, it posts
# health bodies of nested tags to its case's wireserver, each BODY_BYTES long, BODIES at a
# time, ROUNDS times. Before the oracle's work was bounded, two such bodies held the runtime's
# worker threads, shared by every case's fake in `wirecheck run`, for 10-30 s, and an innocent
# agent in the same run lost verdicts. Run beside another agent, it must change none of that
# agent's verdicts. Its own cases fail (it never reports); that is not what it is run for.
import argparse, threading, urllib.error, urllib.request

p = argparse.ArgumentParser()
p.add_argument("--wireserver", required=True)
p.add_argument("--bodies", type=int, default=2, help="bodies sent at once")
p.add_argument("--rounds", type=int, default=1)
p.add_argument("--body-bytes", type=int, default=300 * 1024)
a = p.parse_args()

depth = a.body_bytes // 7
bomb = ("<a>" * depth + "</a>" * depth).encode()


def post():
    request = urllib.request.Request(
        a.wireserver + "/machine?comp=health", data=bomb, method="POST",
        headers={"Content-Type": "text/xml; charset=utf-8", "x-ms-version": "2012-11-30",
                 "x-ms-agent-name": "xml-bomber"})
    try:
        urllib.request.urlopen(request, timeout=60).read()
    except (urllib.error.URLError, OSError):
        pass  # an answer is not what it came for


for _ in range(a.rounds):
    threads = [threading.Thread(target=post) for _ in range(a.bodies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
