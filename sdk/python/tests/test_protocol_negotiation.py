"""Protocol negotiation: 2026-07-28 with toolgate (stdio and HTTP, in
test_client.py), and the fallback to the 2025 handshake with a 2025-only
server (tests/sdk/_legacy_server.ts, the official TypeScript SDK 1.x)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
from typing import Any, Dict, Iterator, List, Optional

import httpx
import pytest

from conftest import DENO, ROOT, Server
from test_client import expect_error, run
from toolgate import Client, ToolgateError

LEGACY = str(ROOT / "tests" / "sdk" / "_legacy_server.ts")


def legacy_stdio(mode: str, protocol: str = "auto", timeout: float = 2.0) -> Client:
    return Client.stdio(
        DENO,
        ["run", "-A", "--cached-only", LEGACY, mode],
        cwd=str(ROOT),
        stderr="ignore",
        timeout=timeout,
        protocol=protocol,
    )


async def methods_seen(client: Client) -> List[str]:
    result = await client.call_tool("methods")
    assert result.structured_content is not None
    return list(result.structured_content["methods"])


@pytest.fixture
def legacy_http() -> Iterator[str]:
    """The 2025-only fixture serving Streamable HTTP with sessions; yields its base URL."""
    process = subprocess.Popen(
        [DENO, "run", "-A", "--cached-only", LEGACY, "http"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()
    match = re.search(r"listening on (http://\S+)", banner)
    try:
        assert match, f"the fixture did not start: {banner!r}"
        yield match.group(1)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def test_stdio_falls_back_to_2025_on_the_same_connection() -> None:
    async def scenario() -> None:
        async with legacy_stdio("stdio") as c:
            assert c.protocol_version == "2025-11-25"
            assert c.server_info["name"] == "legacy-fixture"
            echo = await c.call_tool("echo", text="old")
            assert echo.text == "echo: old"
            assert [tool.name for tool in await c.list_tools()] == ["echo", "methods"]
            # Method not found for the probe, then the handshake, on one process.
            assert (await methods_seen(c))[:3] == [
                "server/discover",
                "initialize",
                "notifications/initialized",
            ]

    run(scenario)


def test_stdio_starts_the_server_again_when_it_exits_on_the_probe() -> None:
    async def scenario() -> None:
        async with legacy_stdio("stdio-strict") as c:
            assert c.protocol_version == "2025-11-25"
            assert (await methods_seen(c))[:2] == ["initialize", "notifications/initialized"]

    run(scenario)


@pytest.mark.parametrize(
    "mode,opening",
    [
        # No answer within the timeout: the probe is cancelled, then the handshake.
        ("stdio-silent", ["server/discover", "notifications/cancelled", "initialize"]),
        ("stdio-unsupported", ["server/discover", "initialize"]),
    ],
)
def test_stdio_falls_back_without_an_answer_or_on_minus_32022_naming_2025(
    mode: str, opening: List[str]
) -> None:
    async def scenario() -> None:
        async with legacy_stdio(mode, timeout=1.0) as c:
            assert c.protocol_version == "2025-11-25"
            assert (await c.call_tool("echo", text=mode)).text == f"echo: {mode}"
            assert (await methods_seen(c))[: len(opening)] == opening

    run(scenario)


def test_http_falls_back_to_a_2025_session(legacy_http: str) -> None:
    async def scenario() -> None:
        async with Client.http(legacy_http) as c:
            assert c.protocol_version == "2025-11-25"
            assert c.session_id is not None
            assert (await c.call_tool("echo", text="http")).text == "echo: http"
            assert (await methods_seen(c))[:2] == ["server/discover", "initialize"]

    run(scenario)


def test_protocol_2026_refuses_a_2025_only_server(legacy_http: str) -> None:
    async def scenario() -> None:
        for client in (
            legacy_stdio("stdio", protocol="2026-07-28"),
            Client.http(legacy_http, protocol="2026-07-28"),
        ):
            error = await expect_error(client.connect(), "MCP_ERROR")
            assert "does not speak MCP 2026-07-28" in error.message
            assert not client.connected
        with pytest.raises(ToolgateError) as usage:
            Client.http(legacy_http, protocol="2024")
        assert usage.value.code == "USAGE"

    run(scenario)


def test_2026_requests_carry_the_envelope_and_the_headers(server: Server) -> None:
    """What goes on the wire, seen by a recording proxy in front of toolgate."""
    seen: List[Dict[str, Any]] = []

    async def scenario() -> None:
        upstream = httpx.AsyncClient()

        async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            length = int(headers.get("content-length", headers.get("Content-Length", "0")))
            body = await reader.readexactly(length) if length else b""
            lowered = {key.lower(): value for key, value in headers.items()}
            if body:
                seen.append({"headers": lowered, "body": json.loads(body)})
            forwarded = {
                key: value
                for key, value in lowered.items()
                if key not in ("host", "content-length", "connection")
            }
            response = await upstream.request(
                method, f"{server.url}{path}", content=body, headers=forwarded
            )
            payload = response.content
            writer.write(
                f"HTTP/1.1 {response.status_code} X\r\n".encode()
                + f"content-type: {response.headers.get('content-type', 'text/plain')}\r\n".encode()
                + f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            writer.close()

        listener = await asyncio.start_server(proxy, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        try:
            async with Client.http(f"http://127.0.0.1:{port}", token=server.token) as c:
                await c.call_tool("memory_set", key="wire", value=1)
        finally:
            listener.close()
            await listener.wait_closed()
            await upstream.aclose()

    run(scenario)
    methods = [item["body"]["method"] for item in seen]
    assert methods == ["server/discover", "tools/call"]
    for item in seen:
        meta: Optional[Dict[str, Any]] = item["body"]["params"]["_meta"]
        assert meta is not None
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "toolgate-sdk-python"
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
        assert item["headers"]["mcp-protocol-version"] == "2026-07-28"
        assert item["headers"]["mcp-method"] == item["body"]["method"]
        assert "mcp-session-id" not in item["headers"]
    assert seen[1]["headers"]["mcp-name"] == "memory_set"
    assert "mcp-name" not in seen[0]["headers"]

