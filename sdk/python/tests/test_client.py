"""The Python SDK against the real toolgate server (stdio and HTTP)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Awaitable, Callable, List, TypeVar

import httpx
import pytest

from conftest import (
    DENO,
    MAIN,
    ROOT,
    TEST_ENV,
    Receiver,
    Server,
    closed_port,
    run_cli,
    start_server,
)
from toolgate import (
    Client,
    Event,
    SseMessage,
    SseParser,
    ToolgateError,
    __version__,
    verify_signature,
)

T = TypeVar("T")


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(scenario(), 60))


async def until(
    what: str, items: List[Event], match: Callable[[Event], bool], timeout: float = 10
) -> Event:
    """The first collected event that matches, waiting up to ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for item in items:
            if match(item):
                return item
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {timeout} s; got {items!r}")
        await asyncio.sleep(0.01)


async def expect_error(call: Awaitable[object], code: str) -> ToolgateError:
    with pytest.raises(ToolgateError) as caught:
        await call
    assert caught.value.code == code, str(caught.value)
    return caught.value


def rest_call(server: Server, tool: str, args: object) -> httpx.Response:
    return httpx.post(
        f"{server.url}/tools/{tool}",
        json=args,
        headers={"Authorization": f"Bearer {server.token}"},
    )


def test_version_matches_deno_json() -> None:
    deno_json = json.loads((ROOT / "deno.json").read_text())
    pyproject = (ROOT / "sdk" / "python" / "pyproject.toml").read_text()
    assert __version__ == deno_json["version"]
    assert f'version = "{deno_json["version"]}"' in pyproject


def test_sse_parser_handles_line_ends_split_anywhere() -> None:
    wire = (
        ': hello\r\nretry: 2500\r\nid: 1\r\nevent: tool.called\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        "data: plain\r\rid: 2\nevent: x\ndata:no-space\n\n"
    )
    expected = [
        SseMessage("tool.called", '{"a":\n1}', "1"),
        SseMessage("message", "plain", "1"),
        SseMessage("x", "no-space", "2"),
    ]
    for size in (1, 2, 3, 7, len(wire)):
        parser = SseParser()
        messages: List[SseMessage] = []
        for start in range(0, len(wire), size):
            messages.extend(parser.push(wire[start : start + size]))
        assert messages == expected, f"chunks of {size}"
        assert parser.retry_ms == 2500


def test_stdio_lists_calls_and_raises_typed_errors(home: Path) -> None:
    async def scenario() -> None:
        client = Client.stdio(
            DENO,
            ["run", "-A", "--cached-only", "--unstable-kv", MAIN, "mcp", "start"],
            env={**TEST_ENV, "TOOLGATE_HOME": str(home)},
            cwd=str(ROOT),
            stderr="ignore",
        )
        assert client.transport == "stdio"
        await expect_error(client.list_tools(), "USAGE")
        assert client.protocol_version is None
        async with client as c:
            assert c.connected
            assert c.protocol_version == "2026-07-28"
            assert c.session_id is None
            assert c.server_info["name"] == "toolgate"
            names = [tool.name for tool in await c.list_tools()]
            assert {"http_request", "memory_set", "memory_get"} <= set(names)

            await c.call_tool("memory_set", key="greeting", value={"text": "hi"})
            got = await c.call_tool("memory_get", key="greeting")
            assert json.loads(got.content[0]["text"])["value"] == {"text": "hi"}
            assert got.structured_content is not None and got.structured_content["found"] is True
            assert got.text == got.content[0]["text"]

            missing = await expect_error(c.call_tool("memory_get"), "TOOL_INPUT_INVALID")
            assert missing.message.startswith("Invalid arguments for memory_get: key: ")
            assert missing.details["fields"][0]["path"] == "key"
            wrong = await expect_error(
                c.call_tool("memory_set", key=42, value=1), "TOOL_INPUT_INVALID"
            )
            assert "key: Invalid input: expected string, received number" in wrong.message
            failed = await expect_error(
                c.call_tool("http_request", url=f"http://127.0.0.1:{closed_port()}/"),
                "PLUGIN_REQUEST_FAILED",
            )
            assert failed.message.startswith("Request to 127.0.0.1:")
            unknown = await expect_error(c.call_tool("no_such_tool"), "TOOL_NOT_FOUND")
            assert unknown.message == 'Unknown tool "no_such_tool"'
            assert str(unknown) == 'TOOL_NOT_FOUND: Unknown tool "no_such_tool"'

            with pytest.raises(ToolgateError) as usage:
                c.on("tool.complete", lambda event: None)
            assert usage.value.code == "USAGE"
            assert usage.value.message.startswith("Events need the HTTP transport")
        assert not client.connected
        assert client.protocol_version is None

    run(scenario)


def test_http_calls_and_errors_with_stateless_requests(server: Server) -> None:
    async def scenario() -> None:
        wrong = Client.http(server.url, token="nope")
        error = await expect_error(wrong.connect(), "UNAUTHORIZED")
        assert "bearer token is wrong" in error.message
        assert not wrong.connected

        async with Client.http(server.url + "/", token=server.token) as c:
            assert c.transport == "http"
            # toolgate speaks 2026-07-28: every request stands alone, no MCP session.
            assert c.protocol_version == "2026-07-28"
            assert c.session_id is None
            assert c.server_info["name"] == "toolgate"
            assert any(tool.name == "memory_set" for tool in await c.list_tools())
            result = await c.call_tool("memory_set", key="k", value=[1, 2])
            assert result.structured_content is not None and result.structured_content["key"] == "k"
            await expect_error(c.call_tool("memory_get"), "TOOL_INPUT_INVALID")
            await expect_error(c.call_tool("memory_list", limit="ten"), "TOOL_INPUT_INVALID")
            unknown = await expect_error(c.call_tool("no_such_tool"), "TOOL_NOT_FOUND")
            assert unknown.message == 'Unknown tool "no_such_tool"'
            await expect_error(
                c.call_tool("http_request", url=f"http://127.0.0.1:{closed_port()}/"),
                "PLUGIN_REQUEST_FAILED",
            )
            # A tool name that is not plain ASCII travels base64-encoded in Mcp-Name.
            await expect_error(c.call_tool("outil_\u00e9t\u00e9"), "TOOL_NOT_FOUND")
            assert httpx.get(f"{server.url}/health").json()["mcp_sessions"] == 0
        assert c.protocol_version is None

    run(scenario)


def test_http_with_protocol_2025_renews_a_forgotten_session(server: Server) -> None:
    async def scenario() -> None:
        async with Client.http(server.url, token=server.token, protocol="2025") as c:
            assert c.protocol_version == "2025-11-25"
            await c.call_tool("memory_set", key="k", value=[1, 2])
            # The server forgets the session (as after idle expiry): the client opens a new one.
            session = c.session_id
            assert session is not None
            async with httpx.AsyncClient() as raw:
                ended = await raw.delete(
                    f"{server.url}/mcp",
                    headers={"Authorization": f"Bearer {server.token}", "Mcp-Session-Id": session},
                )
                assert ended.status_code == 200
            got = await c.call_tool("memory_get", key="k")
            assert got.structured_content is not None and got.structured_content["value"] == [1, 2]
            assert c.session_id not in (None, session)
            assert httpx.get(f"{server.url}/health").json()["mcp_sessions"] == 1
        health = httpx.get(f"{server.url}/health").json()
        assert health["mcp_sessions"] == 0, "closing the client ends its MCP session"

    run(scenario)


def test_http_events_from_calls_made_through_another_transport(server: Server) -> None:
    async def scenario() -> None:
        errors: List[BaseException] = []
        complete: List[Event] = []
        opened: List[Event] = []
        everything: List[Event] = []
        async_seen: List[str] = []

        async def async_handler(event: Event) -> None:
            await asyncio.sleep(0)
            async_seen.append(event.data["tool"])

        client = Client.http(server.url, token=server.token, on_error=errors.append)
        client.on("tool.complete", complete.append)
        client.on("tool.complete", async_handler)
        client.on("circuit.opened", opened.append)
        off = client.on("*", everything.append)
        with pytest.raises(ToolgateError) as unknown:
            client.on("tool.completed", complete.append)
        assert unknown.value.code == "USAGE"
        async with client as c:
            await c.events_ready()
            loop = asyncio.get_running_loop()
            response = await loop.run_in_executor(
                None, rest_call, server, "memory_get", {"key": "k"}
            )
            assert response.status_code == 200
            ok = await until(
                "tool.complete of memory_get",
                complete,
                lambda e: bool(e.data["tool"] == "memory_get"),
            )
            assert ok.type == "tool.complete" and ok.data["ok"] is True
            assert ok.data["latency_ms"] >= 0 and ok.id.startswith("evt_")
            assert ok.data["output"] == {"key": "k", "found": False}

            unreachable = {"url": f"http://127.0.0.1:{closed_port()}/"}
            for _ in range(2):
                failed = await loop.run_in_executor(
                    None, rest_call, server, "http_request", unreachable
                )
                assert failed.status_code == 502
            failure = await until(
                "a failed tool.complete",
                complete,
                lambda e: e.data["tool"] == "http_request" and e.data["ok"] is False,
            )
            assert failure.data["error_code"] == "PLUGIN_REQUEST_FAILED"
            circuit = await until("circuit.opened", opened, lambda e: True)
            assert circuit.data["tool_name"] == "http_request"
            assert circuit.data["threshold"] == 2
            assert circuit.data["reset_after_ms"] == 60000
            await expect_error(c.call_tool("http_request", **unreachable), "CIRCUIT_OPEN")
            await until("audit.written", everything, lambda e: e.type == "audit.written")
            assert all(event.type != "tool.complete" for event in everything)
            assert "memory_get" in async_seen

            off()
            seen = len(everything)
            await loop.run_in_executor(None, rest_call, server, "memory_get", {"key": "again"})
            await until(
                "the second memory_get",
                complete,
                lambda e: bool(
                    e.data["tool"] == "memory_get" and e.data["input"] == {"key": "again"}
                ),
            )
            assert len(everything) == seen, "an unsubscribed handler gets nothing"
        assert errors == []

    run(scenario)


def test_verify_signature_accepts_a_real_delivery_and_rejects_changes(
    home: Path, receiver: Receiver
) -> None:
    secret = "whsec-python"
    added = run_cli(home, "webhooks", "add", "--url", receiver.url, "--secret", secret)
    assert added.returncode == 0, added.stderr
    running = start_server(home)
    try:
        assert receiver.arrived.wait(15), "no delivery arrived"
    finally:
        running.stop()
    delivery = receiver.deliveries[0]
    header = delivery.headers["x-service-signature"]
    assert verify_signature(secret, delivery.body, header)
    assert verify_signature(secret.encode(), delivery.body.decode("utf-8"), header)
    assert json.loads(delivery.body)["id"] == delivery.headers["x-service-delivery"]

    altered = bytearray(delivery.body)
    altered[-2] ^= 1
    assert not verify_signature(secret, bytes(altered), header)
    assert not verify_signature(secret, delivery.body + b" ", header)
    flipped = header[:-1] + ("1" if header.endswith("0") else "0")
    assert not verify_signature(secret, delivery.body, flipped)
    assert not verify_signature(secret, delivery.body, header.replace("sha256=", "sha1="))
    assert not verify_signature(secret, delivery.body, header[:-2])
    assert not verify_signature("other", delivery.body, header)
    assert not verify_signature(secret, delivery.body, None)


def test_verify_signature_known_answer() -> None:
    body = b"The quick brown fox jumps over the lazy dog"
    header = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    assert hmac.new(b"key", body, hashlib.sha256).hexdigest() == header[7:]
    assert verify_signature("key", body, header)
    assert verify_signature("key", body, f"  {header.upper().replace('SHA256=', 'sha256=')} ")


def test_example_agent_runs_against_the_http_server(server: Server) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent.py")],
        env={**os.environ, "TOOLGATE_URL": server.url, "TOOLGATE_API_TOKEN": server.token or ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "memory_get ->" in result.stdout
    assert "TOOL_INPUT_INVALID" in result.stdout


def test_example_agent_starts_its_own_server_over_stdio(home: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TOOLGATE_URL"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent.py")],
        env={**env, "DENO": DENO, "TOOLGATE_HOME": str(home), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "memory_get ->" in result.stdout
