#!/usr/bin/env python3
"""The incumbent for the IMDS throughput figure: a Python http.server fake in the style of
azure-init's testinit (Azure/azure-init, testinit/: `http.server.HTTPServer` +
`BaseHTTPRequestHandler`, one handler class per service, JSON documents served from memory).

Serves FILE at GET /metadata/instance (400 without `Metadata: true`, like IMDS; 404 elsewhere).
Prints the same ready line as fake-wireserver ({"imds": "ADDR"}) and serves until killed.

    python_fake.py --body FILE [--content-type TYPE] [--threading]

--threading uses ThreadingHTTPServer instead of testinit's plain HTTPServer. Per-request logging
is off (testinit logs every request; leaving it on would only make this reference slower).
"""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from urllib.parse import urlparse


def make_handler(body: bytes, content_type: str):
    class IMDSHandler(BaseHTTPRequestHandler):
        """HTTP handler for Azure Instance Metadata Service requests."""

        def do_GET(self):
            path = urlparse(self.path).path
            if self.headers.get("Metadata") != "true":
                self._send(400, b'{"error":"Bad request. Required metadata header not specified"}')
                return
            if path != "/metadata/instance":
                self._send(404, b'{"error":"Not found"}')
                return
            self._send(200, body)

        def _send(self, status: int, payload: bytes):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format, *args):  # noqa: A002 (the base class's name)
            pass

    return IMDSHandler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--body", required=True, help="the response body file")
    parser.add_argument("--content-type", default="application/json; charset=utf-8")
    parser.add_argument("--listen-port", type=int, default=0)
    parser.add_argument("--threading", action="store_true", help="ThreadingHTTPServer")
    args = parser.parse_args()
    with open(args.body, "rb") as f:
        body = f.read()
    server_class = ThreadingHTTPServer if args.threading else HTTPServer
    server = server_class(("127.0.0.1", args.listen_port), make_handler(body, args.content_type))
    host, port = server.server_address[:2]
    sys.stdout.write(json.dumps({"imds": f"{host}:{port}"}) + "\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
