"""MCP JSON-RPC transports: a child process on stdio, and Streamable HTTP.

Both carry either protocol era: 2025 (after an ``initialize`` handshake; over
HTTP with an ``Mcp-Session-Id`` session) and 2026-07-28 (every request
carries its version, client info and client capabilities in
``params._meta``; over HTTP also the ``MCP-Protocol-Version``, ``Mcp-Method``
and ``Mcp-Name`` headers, and no session).
"""

from __future__ import annotations

import abc
import asyncio
import base64
import itertools
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import httpx

from ._errors import ToolgateError, error_from_http, error_from_rpc
from ._sse import SseParser

__all__ = ["Transport", "StdioTransport", "HttpTransport", "ProbeReply", "PROTOCOL_VERSION_KEY"]

JsonObject = Dict[str, Any]

#: Longest JSON-RPC line read from a stdio server (tool outputs can be large).
_LINE_LIMIT = 64 * 1024 * 1024

_METHOD_NOT_FOUND = -32601

#: The ``params._meta`` key naming a 2026-07-28 request's protocol version.
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"

#: The methods whose ``Mcp-Name`` header repeats a field of ``params`` (2026-07-28 on HTTP).
_NAME_HEADER_SOURCE = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

_BASE64_PREFIX = "=?base64?"
_BASE64_SUFFIX = "?="


@dataclass(frozen=True)
class ProbeReply:
    """What a ``server/discover`` probe got back, for the client to judge.

    ``kind`` is ``"result"`` (``result`` holds it), ``"rpc-error"``
    (``rpc_code``, ``message``, ``data``), ``"http-error"`` (``status`` and
    ``error``, an HTTP status without a JSON-RPC error body), ``"closed"``
    (the stdio server exited) or ``"timeout"``.
    """

    kind: str
    result: Optional[JsonObject] = None
    rpc_code: Optional[int] = None
    message: str = ""
    data: Any = None
    status: Optional[int] = None
    error: Optional[ToolgateError] = None


def _modern_version(params: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The protocol version of a 2026-07-28 request (from its ``_meta``), else None."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, Mapping) else None
    return version if isinstance(version, str) else None


def _header_value(value: str) -> str:
    """``value`` as an HTTP field value: as it is when plain visible ASCII,
    else in the ``=?base64?…?=`` form of the 2026-07-28 transport."""
    plain = (
        value != ""
        and value == value.strip()
        and not (value.startswith(_BASE64_PREFIX) and value.endswith(_BASE64_SUFFIX))
        and all(char == "\t" or " " <= char <= "~" for char in value)
    )
    if plain:
        return value
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{_BASE64_PREFIX}{encoded}{_BASE64_SUFFIX}"


def _rpc_error_of(text: str) -> Optional[Mapping[str, Any]]:
    """The ``error`` of a JSON-RPC error response body, else None."""
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return error
    return None


def _result_of(message: Mapping[str, Any]) -> JsonObject:
    """The ``result`` of a JSON-RPC response; raises its ``error``."""
    error = message.get("error")
    if isinstance(error, Mapping):
        raise error_from_rpc(error)
    result = message.get("result")
    return dict(result) if isinstance(result, Mapping) else {}


def _messages(payload: Any) -> Iterator[Mapping[str, Any]]:
    """The JSON-RPC messages of a payload (one message or a batch)."""
    items = payload if isinstance(payload, list) else [payload]
    for item in items:
        if isinstance(item, Mapping):
            yield item


class Transport(abc.ABC):
    """What the client needs from a transport."""

    #: The protocol version negotiated by ``initialize`` (2025 era only).
    protocol_version: Optional[str] = None

    async def start(self) -> None:
        """Opens the connection (starts the process)."""

    @abc.abstractmethod
    async def request(
        self, method: str, params: Optional[JsonObject], timeout: float
    ) -> JsonObject:
        """Sends a request; returns its result or raises :class:`ToolgateError`.

        A request whose ``params._meta`` names a protocol version is sent as
        a 2026-07-28 request (over HTTP: with its headers and no session)."""

    @abc.abstractmethod
    async def probe(self, params: JsonObject, timeout: float) -> ProbeReply:
        """Sends ``server/discover`` and reports what came back; raises
        :class:`ToolgateError` only when the server cannot be reached."""

    @abc.abstractmethod
    async def notify(self, method: str, params: Optional[JsonObject] = None) -> None:
        """Sends a notification."""

    def reset_session(self) -> None:
        """Forgets the session, so the next ``initialize`` opens a new one."""

    async def close(self) -> None:
        """Closes the connection."""


class StdioTransport(Transport):
    """Starts the server as a child process and speaks newline-delimited JSON-RPC."""

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        env: Optional[Mapping[str, str]],
        cwd: Optional[str],
        stderr: str,
    ) -> None:
        if stderr not in ("inherit", "ignore"):
            raise ToolgateError(
                "USAGE", f'Invalid stderr {stderr!r}: expected "inherit" or "ignore"'
            )
        self._command = command
        self._args = list(args)
        self._env = dict(env or {})
        self._cwd = cwd
        self._stderr = stderr
        self._process: Optional[asyncio.subprocess.Process] = None
        self._reader: Optional[asyncio.Task[None]] = None
        self._pending: Dict[int, asyncio.Future[Mapping[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._write_lock: Optional[asyncio.Lock] = None
        self._failure: Optional[ToolgateError] = None
        #: Set once a 2026-07-28 request was sent: the server then sends no
        #: requests of its own, and the client answers none.
        self.modern = False

    async def start(self) -> None:
        env = {**os.environ, **self._env}
        self._write_lock = asyncio.Lock()
        try:
            self._process = await asyncio.create_subprocess_exec(
                self._command,
                *self._args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None if self._stderr == "inherit" else asyncio.subprocess.DEVNULL,
                env=env,
                cwd=self._cwd,
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            raise ToolgateError(
                "CONNECTION_FAILED", f"Cannot start {self._command}: {exc}"
            ) from exc
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        reason = "the server closed its stdout"
        try:
            while True:
                line = await process.stdout.readline()
                if not line:
                    break
                try:
                    payload = json.loads(line)
                except ValueError:
                    reason = "the server wrote a line that is not JSON-RPC"
                    break
                for message in _messages(payload):
                    await self._handle(message)
        except ValueError as exc:  # a line over the limit
            reason = f"unreadable output: {exc}"
        finally:
            self._fail(ToolgateError("CONNECTION_FAILED", f"Connection closed: {reason}"))

    async def _handle(self, message: Mapping[str, Any]) -> None:
        if "method" in message:
            if "id" in message and not self.modern:  # a request from the server (2025)
                if message["method"] == "ping":
                    await self._send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                else:
                    await self._send(
                        {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "error": {"code": _METHOD_NOT_FOUND, "message": "Method not found"},
                        }
                    )
            return  # notifications (e.g. tools/list_changed) need no answer
        future = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
        if future is not None and not future.done():
            future.set_result(message)

    def _fail(self, error: ToolgateError) -> None:
        self._failure = self._failure or error
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(self._failure)

    async def _send(self, message: JsonObject) -> None:
        process = self._process
        lock = self._write_lock
        if process is None or process.stdin is None or lock is None:
            raise ToolgateError("USAGE", "Not connected: call connect() first")
        if self._failure is not None:
            raise self._failure
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            async with lock:
                process.stdin.write(data)
                await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ToolgateError("CONNECTION_FAILED", f"Connection closed: {exc}") from exc

    async def _exchange(
        self, method: str, params: Optional[JsonObject], timeout: float
    ) -> Mapping[str, Any]:
        """Sends a request and returns the response message; on timeout it
        cancels the request (``notifications/cancelled``) and raises
        ``REQUEST_TIMEOUT``."""
        request_id = next(self._ids)
        future: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(message)
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            await self._send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id, "reason": "timeout"},
                }
            )
            raise ToolgateError(
                "REQUEST_TIMEOUT", f"Request timed out: no answer to {method} within {timeout} s"
            ) from None
        finally:
            self._pending.pop(request_id, None)

    async def request(
        self, method: str, params: Optional[JsonObject], timeout: float
    ) -> JsonObject:
        if _modern_version(params) is not None:
            self.modern = True
        return _result_of(await self._exchange(method, params, timeout))

    async def probe(self, params: JsonObject, timeout: float) -> ProbeReply:
        try:
            response = await self._exchange("server/discover", params, timeout)
        except ToolgateError as error:
            if error.code == "REQUEST_TIMEOUT":
                return ProbeReply("timeout", error=error)
            if self._failure is not None:  # the process ended: a server that exits on the probe
                return ProbeReply("closed", error=error)
            raise
        error_object = response.get("error")
        if isinstance(error_object, Mapping):
            code = error_object.get("code")
            return ProbeReply(
                "rpc-error",
                rpc_code=code if isinstance(code, int) else None,
                message=str(error_object.get("message", "")),
                data=error_object.get("data"),
                error=error_from_rpc(error_object),
            )
        result = response.get("result")
        return ProbeReply("result", result=dict(result) if isinstance(result, Mapping) else {})

    async def notify(self, method: str, params: Optional[JsonObject] = None) -> None:
        message: JsonObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def close(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except asyncio.TimeoutError:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 2)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
        if self._reader is not None:
            await self._reader


class HttpTransport(Transport):
    """MCP Streamable HTTP at ``<base_url>/mcp``: POSTs whose answers are JSON or SSE."""

    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self._http = http
        self._endpoint = base_url.rstrip("/") + "/mcp"
        self._ids = itertools.count(1)
        #: ``Mcp-Session-Id`` assigned by the server at ``initialize`` (2025 era).
        self.session_id: Optional[str] = None

    def reset_session(self) -> None:
        self.session_id = None
        self.protocol_version = None

    def _headers(self, message: Mapping[str, Any]) -> Dict[str, str]:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        params = message.get("params")
        modern = _modern_version(params)
        if modern is not None:
            # 2026-07-28: the headers repeat the body, and there is no session.
            headers["MCP-Protocol-Version"] = modern
            method = str(message.get("method", ""))
            headers["Mcp-Method"] = method
            field = _NAME_HEADER_SOURCE.get(method)
            name = params.get(field) if field and isinstance(params, Mapping) else None
            if isinstance(name, str):
                headers["Mcp-Name"] = _header_value(name)
            return headers
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def request(
        self, method: str, params: Optional[JsonObject], timeout: float
    ) -> JsonObject:
        request_id = next(self._ids)
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            status, answer, text = await asyncio.wait_for(
                self._post(message, request_id), timeout
            )
        except asyncio.TimeoutError:
            raise ToolgateError(
                "REQUEST_TIMEOUT", f"Request timed out: no answer to {method} within {timeout} s"
            ) from None
        if answer is None:
            rpc_error = _rpc_error_of(text) if _modern_version(params) is not None else None
            if rpc_error is not None:
                # A 2026-07-28 request refused with a JSON-RPC error (-32022, -32020, ...).
                raise error_from_rpc(rpc_error)
            raise error_from_http(status, text)
        return _result_of(answer)

    async def probe(self, params: JsonObject, timeout: float) -> ProbeReply:
        request_id = next(self._ids)
        message: JsonObject = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "server/discover",
            "params": params,
        }
        try:
            status, answer, text = await asyncio.wait_for(
                self._post(message, request_id), timeout
            )
        except asyncio.TimeoutError:
            # A server that does not answer over HTTP is down, not old.
            raise ToolgateError(
                "REQUEST_TIMEOUT",
                f"Request timed out: no answer to server/discover within {timeout} s",
            ) from None
        rpc_error = answer.get("error") if answer is not None else _rpc_error_of(text)
        if isinstance(rpc_error, Mapping) and (answer is not None or status < 500):
            code = rpc_error.get("code")
            return ProbeReply(
                "rpc-error",
                rpc_code=code if isinstance(code, int) else None,
                message=str(rpc_error.get("message", "")),
                data=rpc_error.get("data"),
                status=status,
                error=error_from_rpc(rpc_error),
            )
        if answer is None:
            return ProbeReply("http-error", status=status, error=error_from_http(status, text))
        result = answer.get("result")
        return ProbeReply("result", result=dict(result) if isinstance(result, Mapping) else {})

    async def notify(self, method: str, params: Optional[JsonObject] = None) -> None:
        message: JsonObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        status, _, text = await self._post(message, None)
        if not 200 <= status < 300:
            raise error_from_http(status, text)

    async def _post(
        self, message: JsonObject, request_id: Optional[int]
    ) -> Tuple[int, Optional[Mapping[str, Any]], str]:
        """POSTs one message: ``(status, the response to request_id, "")`` on
        success, ``(status, None, body text)`` on an HTTP error."""
        body = json.dumps(message, separators=(",", ":")).encode("utf-8")
        try:
            async with self._http.stream(
                "POST", self._endpoint, content=body, headers=self._headers(message)
            ) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    text = (await response.aread()).decode("utf-8", "replace")
                    return status, None, text
                session_id = response.headers.get("mcp-session-id")
                if session_id and _modern_version(message.get("params")) is None:
                    self.session_id = session_id
                if request_id is None:
                    return status, None, ""
                if response.headers.get("content-type", "").startswith("text/event-stream"):
                    return status, await self._answer_from_stream(response, request_id), ""
                payload = json.loads(await response.aread())
                for item in _messages(payload):
                    if item.get("id") == request_id:
                        return status, item, ""
                raise ToolgateError(
                    "MCP_ERROR", "The server's answer holds no response to the request"
                )
        except httpx.TimeoutException as exc:
            raise ToolgateError("REQUEST_TIMEOUT", f"Request timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise ToolgateError("CONNECTION_FAILED", f"Cannot reach the server: {exc}") from exc

    @staticmethod
    async def _answer_from_stream(response: httpx.Response, request_id: int) -> Mapping[str, Any]:
        parser = SseParser()
        async for chunk in response.aiter_text():
            for event in parser.push(chunk):
                if not event.data:
                    continue
                for item in _messages(json.loads(event.data)):
                    if item.get("id") == request_id and ("result" in item or "error" in item):
                        return item
        raise ToolgateError("CONNECTION_FAILED", "Connection closed: the answer stream ended early")

    async def close(self) -> None:
        session_id = self.session_id
        self.reset_session()
        if not session_id:
            return
        try:
            response = await self._http.delete(
                self._endpoint, headers={"Mcp-Session-Id": session_id}
            )
            await response.aclose()
        except httpx.HTTPError:
            pass  # The server is gone or forgot the session: nothing left to end.


def split_args(args: Sequence[str]) -> List[str]:
    """The arguments as a list (a lone string is one argument, not characters)."""
    return [args] if isinstance(args, str) else list(args)
