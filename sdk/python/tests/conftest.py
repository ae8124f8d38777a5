"""Fixtures: the real toolgate server (HTTP on port 0, or stdio), a temp data
dir, and a webhook receiver recording raw deliveries."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "sdk" / "python"))

DENO = os.environ.get("DENO") or shutil.which("deno") or "/usr/local/bin/deno"
MAIN = str(ROOT / "main.ts")


def closed_port() -> int:
    """A local port with nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Every toolgate process of the tests: no colour, and the egress policy told
# that the tests' receivers and unreachable ports on 127.0.0.1 are allowed.
TEST_ENV = {"NO_COLOR": "1", "TOOLGATE_EGRESS_ALLOW": "127.0.0.1/32"}


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs ``toolgate <args>`` with the data dir ``home``."""
    return subprocess.run(
        [DENO, "run", "-A", "--cached-only", "--unstable-kv", MAIN, *args],
        cwd=ROOT,
        env={**os.environ, **TEST_ENV, "TOOLGATE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class Delivery:
    """One webhook delivery as received."""

    headers: Dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1, recording raw deliveries."""

    url: str
    deliveries: List[Delivery] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    record = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            record.deliveries.append(
                Delivery({k.lower(): v for k, v in self.headers.items()}, body)
            )
            record.arrived.set()
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    record.url = f"http://127.0.0.1:{server.server_port}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield record
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Server:
    """A running ``toolgate mcp start --transport http --port 0``."""

    url: str
    home: Path
    token: Optional[str]
    process: subprocess.Popen[str]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


def start_server(
    home: Path,
    *,
    token: Optional[str] = None,
    config: Optional[Dict[str, Any]] = None,
) -> Server:
    """Starts the HTTP server and waits for its listening line."""
    if config is not None:
        (home / "config.json").write_text(json.dumps(config))
    env = {**os.environ, **TEST_ENV, "TOOLGATE_HOME": str(home)}
    if token:
        env["TOOLGATE_API_TOKEN"] = token
    process = subprocess.Popen(
        [DENO, "run", "-A", "--cached-only", MAIN, "mcp", "start", "--transport", "http", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()
    match = re.search(r"listening on (http://\S+:\d+) ", banner)
    if not match:
        process.kill()
        process.wait()
        raise RuntimeError(f"server did not start: {banner!r}")
    return Server(url=match.group(1), home=home, token=token, process=process)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    data = tmp_path / "toolgate"
    data.mkdir()
    return data


@pytest.fixture
def server(home: Path) -> Iterator[Server]:
    """A server with a token and a circuit threshold of 2."""
    running = start_server(
        home,
        token="py-token",
        config={"tools": {"circuit_threshold": 2, "circuit_reset_ms": 60000}},
    )
    try:
        yield running
    finally:
        running.stop()
