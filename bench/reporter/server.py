#!/usr/bin/env python3
"""Tiny loopback wireserver + IMDS for the reporter benchmark: answers at once, HTTP/1.1.

POST /provisioning/health -> 201; GET /?comp=versions, GET /machine/?comp=goalstate -> XML;
POST /machine?comp=health -> 200; GET /metadata/instance -> the instance document.
Prints the port on stdout when ready. Counts requests per target (GET /__counts).
"""
import http.server
import json
import sys
import threading

VERSIONS = b"""<?xml version="1.0" encoding="utf-8"?>
<Versions>
  <Preferred><Version>2012-11-30</Version></Preferred>
  <Supported><Version>2012-11-30</Version><Version>2010-12-15</Version></Supported>
</Versions>"""

GOAL_STATE = b"""<?xml version="1.0" encoding="utf-8"?>
<GoalState xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">
  <Version>2010-12-15</Version>
  <Incarnation>1</Incarnation>
  <Machine><ExpectedState>Started</ExpectedState></Machine>
  <Container>
    <ContainerId>c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2</ContainerId>
    <RoleInstanceList>
      <RoleInstance>
        <InstanceId>b61f93d0-e1ed-40b2-b067-22c243233448.MachineRole_IN_0</InstanceId>
        <State>Started</State>
        <Configuration><ConfigName>MachineRole_IN_0.0.MachineRole.xml</ConfigName></Configuration>
      </RoleInstance>
    </RoleInstanceList>
  </Container>
</GoalState>"""

IMDS = json.dumps({
    "compute": {"vmId": "11111111-2222-3333-4444-555555555555", "name": "bench-vm"},
    "extended": {"compute": {"hasCustomData": False, "ppsType": "None"}},
}).encode()

COUNTS = {}
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per answer and no Nagle: otherwise header and body go out as two small
    # segments and delayed ACKs add ~40 ms to keep-alive requests.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="text/xml; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def count(self):
        with LOCK:
            key = f"{self.command} {self.path}"
            COUNTS[key] = COUNTS.get(key, 0) + 1

    def do_GET(self):
        if self.path == "/__counts":
            with LOCK:
                body = json.dumps(COUNTS, sort_keys=True).encode()
            return self.answer(200, body, "application/json")
        self.count()
        if self.path == "/?comp=versions":
            self.answer(200, VERSIONS)
        elif self.path == "/machine/?comp=goalstate":
            self.answer(200, GOAL_STATE)
        elif self.path.startswith("/metadata/instance"):
            self.answer(200, IMDS, "application/json; charset=utf-8")
        else:
            self.answer(404)

    def do_POST(self):
        self.count()
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/provisioning/health":
            self.answer(201)
        elif self.path in ("/machine?comp=health", "/machine/?comp=health"):
            self.answer(200)
        else:
            self.answer(404)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
