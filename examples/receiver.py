"""A toolgate webhook receiver that verifies X-Service-Signature over the raw
body bytes with a constant-time comparison (hmac.compare_digest).

Run: WEBHOOK_SECRET=... python3 examples/receiver.py [port]
then: toolgate webhooks add --url http://127.0.0.1:<port>/ --secret ...
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def verify(secret: str, raw_body: bytes, header: str | None) -> bool:
    """Check a ``sha256=<hex>`` header against the raw body bytes."""
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


class Receiver(BaseHTTPRequestHandler):
    secret = os.environ.get("WEBHOOK_SECRET", "")

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not verify(self.secret, raw, self.headers.get("X-Service-Signature")):
            self.send_response(401)
            self.end_headers()
            return
        event = json.loads(raw)  # parse only after verifying the exact bytes
        print(f"verified {event['type']} {self.headers.get('X-Service-Delivery')}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    if not Receiver.secret:
        sys.exit("Set WEBHOOK_SECRET to the webhook's --secret")
    server = HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8787), Receiver)
    print(f"listening on {server.server_port}", flush=True)
    server.serve_forever()
