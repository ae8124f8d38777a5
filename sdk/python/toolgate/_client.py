"""The asynchronous toolgate client."""

from __future__ import annotations

import inspect
import json
import logging
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

import httpx

from ._errors import ToolgateError, error_from_result
from ._events import EventStream
from ._sse import SseMessage
from ._transports import (
    PROTOCOL_VERSION_KEY,
    HttpTransport,
    JsonObject,
    ProbeReply,
    StdioTransport,
    Transport,
    split_args,
)
from ._types import EVENT_NAMES, SERVER_EVENT_TYPES, Event, EventHandler, Tool, ToolResult
from ._version import __version__

__all__ = ["Client"]

logger = logging.getLogger("toolgate")

#: The revision spoken when the server offers it: no handshake, no session;
#: every request carries its version, client info and capabilities in ``_meta``.
MODERN_PROTOCOL_VERSION = "2026-07-28"
#: The 2025 revision asked for in the ``initialize`` handshake, and those accepted in reply.
_LEGACY_PROTOCOL_VERSION = "2025-11-25"
_LEGACY_VERSIONS = frozenset({"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"})
#: What the ``protocol`` option accepts.
_PROTOCOLS = ("auto", "2025", MODERN_PROTOCOL_VERSION)

_CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
_CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
_SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
_UNSUPPORTED_PROTOCOL_VERSION = -32022


def _version_list(value: Any) -> List[str]:
    """The protocol versions of a ``supportedVersions`` / ``supported`` list."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def _default_on_error(error: BaseException) -> None:
    logger.warning("toolgate: %s", error, exc_info=error)


def _session_gone(error: ToolgateError) -> bool:
    status = error.details.get("status") if isinstance(error.details, dict) else None
    return status == 404 and "session" in error.message.lower()


class Client:
    """An asynchronous toolgate client: list and call tools over MCP, and
    (over HTTP) subscribe to events.

    It speaks MCP revision 2026-07-28 when the server offers it (asked with
    ``server/discover``; then every request stands alone, with no session)
    and falls back to the 2025 ``initialize`` handshake otherwise;
    :attr:`protocol_version` tells which.

    Create one with :meth:`stdio` or :meth:`http` and use it inside
    ``async with``::

        async with Client.http("http://127.0.0.1:7821", token=token) as client:
            client.on("tool.complete", lambda event: print(event.data["tool"], event.data["ok"]))
            result = await client.call_tool("memory_set", key="greeting", value="hello")
            print(result.content[0]["text"])

        async with Client.stdio("toolgate", ["mcp", "start"]) as client:
            print([tool.name for tool in await client.list_tools()])
    """

    def __init__(
        self,
        *,
        stdio: Optional[Callable[[], Transport]] = None,
        base_url: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 60.0,
        name: str = "toolgate-sdk-python",
        reconnect_delay: float = 1.0,
        max_reconnect_delay: float = 30.0,
        on_error: Optional[Callable[[BaseException], None]] = None,
        protocol: str = "auto",
    ) -> None:
        """Prefer :meth:`stdio` and :meth:`http`."""
        if (stdio is None) == (base_url is None):
            raise ToolgateError("USAGE", "Invalid client: give either stdio or base_url")
        if timeout <= 0:
            raise ToolgateError("USAGE", f"Invalid timeout: {timeout} is not positive")
        if protocol not in _PROTOCOLS:
            raise ToolgateError(
                "USAGE",
                f"Invalid protocol {protocol!r}: expected one of {', '.join(map(repr, _PROTOCOLS))}",
            )
        self._protocol = protocol
        self._protocol_version: Optional[str] = None
        #: The ``_meta`` envelope of every request once 2026-07-28 is negotiated.
        self._envelope: Optional[JsonObject] = None
        self._new_stdio = stdio
        self._base_url = base_url
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._name = name
        self._http: Optional[httpx.AsyncClient] = None
        self._transport: Optional[Transport] = None
        self._reconnect_delay = reconnect_delay
        self._max_reconnect_delay = max_reconnect_delay
        self._on_error = on_error or _default_on_error
        self._connected = False
        self._events: Optional[EventStream] = None
        self._handlers: Dict[str, List[EventHandler]] = {}
        #: What the server said about itself (``name``, ``version``), from
        #: ``server/discover`` or the ``initialize`` handshake.
        self.server_info: Dict[str, Any] = {}

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        stderr: str = "inherit",
        timeout: float = 60.0,
        protocol: str = "auto",
    ) -> "Client":
        """A client that starts the server as a child process and speaks MCP on its stdio.

        :param command: The program, e.g. ``toolgate`` or ``deno``.
        :param args: Its arguments, e.g. ``["mcp", "start"]``.
        :param env: Extra environment variables (over this process's environment).
        :param cwd: Working directory of the child.
        :param stderr: ``"inherit"`` (the server's log lines show) or ``"ignore"``.
        :param timeout: Longest wait for one answer, in seconds.
        :param protocol: ``"auto"`` (2026-07-28 when the server speaks it, else
            the 2025 handshake), ``"2025"`` or ``"2026-07-28"`` (that revision only).
        """
        if stderr not in ("inherit", "ignore"):
            raise ToolgateError(
                "USAGE", f'Invalid stderr {stderr!r}: expected "inherit" or "ignore"'
            )
        arguments = split_args(args)
        return cls(
            stdio=lambda: StdioTransport(command, arguments, env, cwd, stderr),
            timeout=timeout,
            protocol=protocol,
        )

    @classmethod
    def http(
        cls,
        base_url: str,
        token: Optional[str] = None,
        *,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 60.0,
        reconnect_delay: float = 1.0,
        max_reconnect_delay: float = 30.0,
        on_error: Optional[Callable[[BaseException], None]] = None,
        protocol: str = "auto",
    ) -> "Client":
        """A client of a running server's HTTP transport (MCP at ``<base_url>/mcp``).

        :param base_url: The server's address, e.g. ``http://127.0.0.1:7821``.
        :param token: ``TOOLGATE_API_TOKEN``, sent as ``Authorization: Bearer``.
        :param headers: Extra request headers.
        :param timeout: Longest wait for one answer, in seconds.
        :param reconnect_delay: First wait before the event stream reconnects, in seconds.
        :param max_reconnect_delay: Longest wait between reconnections, in seconds.
        :param on_error: Receives errors no call can raise (a handler that raised,
            an event stream that failed); default: logged to the ``toolgate`` logger.
        :param protocol: ``"auto"`` (2026-07-28 when the server speaks it, else
            the 2025 handshake with a session), ``"2025"`` or ``"2026-07-28"``.
        """
        all_headers = dict(headers or {})
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        return cls(
            base_url=base_url,
            headers=all_headers,
            timeout=timeout,
            reconnect_delay=reconnect_delay,
            max_reconnect_delay=max_reconnect_delay,
            on_error=on_error,
            protocol=protocol,
        )

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self._base_url is None else "http"

    @property
    def connected(self) -> bool:
        """Whether :meth:`connect` succeeded and :meth:`close` did not follow."""
        return self._connected

    @property
    def session_id(self) -> Optional[str]:
        """The MCP session id over HTTP with a 2025 revision (``Mcp-Session-Id``;
        also the ``session_id`` of this client's calls in ``tool.called``
        events and the audit log). None over stdio and with 2026-07-28, which
        has no sessions."""
        transport = self._transport
        return transport.session_id if isinstance(transport, HttpTransport) else None

    @property
    def protocol_version(self) -> Optional[str]:
        """The MCP revision negotiated at :meth:`connect`: ``"2026-07-28"``
        with a server that speaks it, a 2025 revision (e.g. ``"2025-11-25"``)
        with an older server or with ``protocol="2025"``; None while not connected."""
        return self._protocol_version if self._connected else None

    async def __aenter__(self) -> "Client":
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Starts the server (stdio) or opens an MCP session (HTTP), and opens
        the event stream when handlers are registered. Idempotent.

        :raises ToolgateError: ``CONNECTION_FAILED``, ``UNAUTHORIZED``, ...
        """
        if self._connected:
            return
        if self._base_url is not None:
            self._http = httpx.AsyncClient(
                headers=self._headers, timeout=httpx.Timeout(self._timeout)
            )
            self._transport = HttpTransport(self._http, self._base_url)
        else:
            assert self._new_stdio is not None
            self._transport = self._new_stdio()
        try:
            await self._transport.start()
            await self._negotiate()
        except BaseException:
            await self._release()
            raise
        self._connected = True
        if self._handlers:
            self._start_events()

    def _connection(self) -> Transport:
        if not self._connected or self._transport is None:
            raise ToolgateError("USAGE", "Not connected: use `async with` or call connect() first")
        return self._transport

    async def _negotiate(self) -> None:
        """Picks the protocol revision: 2026-07-28 when the server offers it in
        answer to ``server/discover``, else the 2025 ``initialize`` handshake."""
        self._protocol_version = None
        self._envelope = None
        if self._protocol == "2025":
            await self._initialize()
            return
        verdict, offered = await self._probe()
        if verdict == "modern":
            return
        if self._protocol == MODERN_PROTOCOL_VERSION:
            listed = f" (it offers {', '.join(offered)})" if offered else ""
            raise ToolgateError(
                "MCP_ERROR",
                f"Unsupported server: it does not speak MCP {MODERN_PROTOCOL_VERSION}{listed}",
                {"supported": offered},
            )
        if verdict == "restart":
            # The server exited on the probe (as some 2025 servers do): start it again.
            assert self._transport is not None and self._new_stdio is not None
            await self._transport.close()
            self._transport = self._new_stdio()
            await self._transport.start()
        await self._initialize()

    def _meta_envelope(self, version: str) -> JsonObject:
        """The ``params._meta`` of a 2026-07-28 request."""
        return {
            PROTOCOL_VERSION_KEY: version,
            _CLIENT_INFO_KEY: {"name": self._name, "version": __version__},
            _CLIENT_CAPABILITIES_KEY: {},
        }

    async def _probe(self) -> Tuple[str, List[str]]:
        """Asks ``server/discover``: ``("modern", ...)`` once 2026-07-28 is
        adopted, ``("legacy", offered)`` for an older server, ``("restart",
        ...)`` when a stdio server exited on the probe.

        :raises ToolgateError: when the server cannot be reached, refuses the
            token, fails (HTTP 5xx) or does not answer over HTTP.
        """
        assert self._transport is not None
        envelope = self._meta_envelope(MODERN_PROTOCOL_VERSION)
        reply: ProbeReply = await self._transport.probe({"_meta": envelope}, self._timeout)
        if reply.kind == "result":
            result = reply.result or {}
            offered = _version_list(result.get("supportedVersions"))
            if MODERN_PROTOCOL_VERSION not in offered:
                return "legacy", offered
            meta = result.get("_meta")
            info = meta.get(_SERVER_INFO_KEY) if isinstance(meta, Mapping) else None
            self.server_info = dict(info) if isinstance(info, Mapping) else {}
            self._envelope = envelope
            self._protocol_version = MODERN_PROTOCOL_VERSION
            return "modern", offered
        if reply.kind == "closed":
            return "restart", []
        if reply.kind == "timeout":  # stdio: a server that ignores unknown requests
            return "legacy", []
        if reply.kind == "http-error":
            status = reply.status or 0
            if status in (401, 403) or status >= 500:
                assert reply.error is not None
                raise reply.error
            return "legacy", []
        # A JSON-RPC error: Method not found from a 2025 server, or -32022 naming what it speaks.
        offered = []
        if reply.rpc_code == _UNSUPPORTED_PROTOCOL_VERSION and isinstance(reply.data, Mapping):
            offered = _version_list(reply.data.get("supported"))
        return "legacy", offered

    async def _initialize(self) -> None:
        """The 2025 handshake (over HTTP it opens a session)."""
        assert self._transport is not None
        result = await self._transport.request(
            "initialize",
            {
                "protocolVersion": _LEGACY_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": self._name, "version": __version__},
            },
            self._timeout,
        )
        version = result.get("protocolVersion")
        if version not in _LEGACY_VERSIONS:
            raise ToolgateError(
                "MCP_ERROR", f"Unsupported protocol version {version!r} offered by the server"
            )
        assert isinstance(version, str)
        self._transport.protocol_version = version
        self._protocol_version = version
        info = result.get("serverInfo")
        self.server_info = dict(info) if isinstance(info, Mapping) else {}
        await self._transport.notify("notifications/initialized")

    async def _request(self, method: str, params: Optional[JsonObject]) -> JsonObject:
        transport = self._connection()
        if self._envelope is not None:
            # 2026-07-28: every request is self-contained.
            return await transport.request(
                method, {**(params or {}), "_meta": dict(self._envelope)}, self._timeout
            )
        try:
            return await transport.request(method, params, self._timeout)
        except ToolgateError as error:
            if self.transport != "http" or not _session_gone(error):
                raise
        # The server forgot the session (idle expiry, restart): open a new one, once.
        transport.reset_session()
        await self._initialize()
        return await transport.request(method, params, self._timeout)

    async def list_tools(self) -> List[Tool]:
        """Every tool on offer (following pagination).

        :raises ToolgateError: ``USAGE`` when not connected; connection errors.
        """
        tools: List[Tool] = []
        cursor: Optional[str] = None
        while True:
            page = await self._request("tools/list", {"cursor": cursor} if cursor else None)
            for tool in page.get("tools", []):
                tools.append(
                    Tool(
                        name=tool["name"],
                        description=tool.get("description") or "",
                        input_schema=dict(tool.get("inputSchema") or {}),
                    )
                )
            next_cursor = page.get("nextCursor")
            if not next_cursor:
                return tools
            cursor = str(next_cursor)

    async def call_tool(self, name: str, /, **arguments: Any) -> ToolResult:
        """Calls a tool through the gateway's pipeline.

        :param name: The tool, e.g. ``memory_set``.
        :param arguments: Its named arguments.
        :returns: The output as JSON text in ``content[0]["text"]`` and as a
            dict in ``structured_content``.
        :raises ToolgateError: with the server's code when the call failed
            (``TOOL_INPUT_INVALID``, ``PLUGIN_REQUEST_FAILED``, ``CIRCUIT_OPEN``,
            ...) or the tool is unknown (``TOOL_NOT_FOUND``).
        """
        result = await self._request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise error_from_result(result)
        structured = result.get("structuredContent")
        return ToolResult(
            content=[dict(item) for item in result.get("content", []) if isinstance(item, Mapping)],
            structured_content=dict(structured) if isinstance(structured, Mapping) else None,
        )

    def on(self, event: str, handler: EventHandler) -> Callable[[], None]:
        """Subscribes to events (HTTP only; they come from ``GET /events``).

        ``event`` is one of the 8 event types, ``tool.complete`` (after every
        tool call: ``data["tool"]`` names the tool and ``data["ok"]`` tells
        success; built from ``tool.called`` and ``tool.failed``), or ``*``
        (every server event). Events of calls made by any client arrive. The
        handler may be a function or a coroutine function; handlers run in
        event order. The stream opens on the first subscription (or at
        :meth:`connect`), reconnects by itself and resumes with ``Last-Event-ID``.

        :returns: A function that unsubscribes the handler.
        :raises ToolgateError: ``USAGE`` on a stdio client or for an unknown event name.
        """
        if self._base_url is None:
            raise ToolgateError(
                "USAGE",
                "Events need the HTTP transport: create the client with Client.http(...) "
                "(a stdio client has no event stream)",
            )
        if event not in EVENT_NAMES:
            raise ToolgateError(
                "USAGE", f"Unknown event {event!r}: expected one of {', '.join(EVENT_NAMES)}"
            )
        self._handlers.setdefault(event, []).append(handler)
        if self._connected:
            self._start_events()

        def unsubscribe() -> None:
            handlers = self._handlers.get(event, [])
            if handler in handlers:
                handlers.remove(handler)
            if not handlers:
                self._handlers.pop(event, None)

        return unsubscribe

    async def events_ready(self) -> None:
        """Returns once the event stream is open: events emitted from then on
        reach the handlers. Opens the stream if no handler did yet.

        :raises ToolgateError: ``USAGE`` on a stdio or unconnected client;
            ``UNAUTHORIZED`` when the token is refused.
        """
        if self._base_url is None:
            raise ToolgateError("USAGE", "Events need the HTTP transport: use Client.http(...)")
        self._connection()
        self._start_events()
        assert self._events is not None
        await self._events.ready()

    def _start_events(self) -> None:
        if self._events is not None or self._http is None or self._base_url is None:
            return
        self._events = EventStream(
            self._http,
            self._base_url.rstrip("/") + "/events",
            self._dispatch,
            self._on_error,
            self._reconnect_delay,
            self._max_reconnect_delay,
        )
        self._events.start()

    async def _dispatch(self, message: SseMessage) -> None:
        if message.event == "error":
            details: Any = None
            text = message.data
            try:
                details = json.loads(message.data)
                if isinstance(details, dict) and isinstance(details.get("message"), str):
                    text = details["message"]
            except ValueError:
                pass  # Plain text: reported as it is.
            self._on_error(ToolgateError("CONNECTION_FAILED", text, details))
            return
        if message.event not in SERVER_EVENT_TYPES:
            return
        try:
            envelope = json.loads(message.data)
            event = Event(
                id=envelope["id"],
                type=envelope["type"],
                timestamp=envelope["timestamp"],
                data=dict(envelope["data"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            self._on_error(ToolgateError("MCP_ERROR", f"Unreadable {message.event} event: {exc}"))
            return
        await self._emit(event.type, event)
        await self._emit("*", event)
        if event.type in ("tool.called", "tool.failed"):
            data = {
                **event.data,
                "tool": event.data.get("tool_name"),
                "ok": event.type == "tool.called",
            }
            await self._emit(
                "tool.complete", Event(event.id, "tool.complete", event.timestamp, data)
            )

    async def _emit(self, name: str, event: Event) -> None:
        for handler in list(self._handlers.get(name, ())):
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # a handler's failure must not stop the stream
                self._on_error(exc)

    async def close(self) -> None:
        """Closes the event stream and the MCP session (``DELETE /mcp``, 2025
        only), or stops the stdio server. Handlers stay registered for a later
        :meth:`connect`."""
        self._connected = False
        self._protocol_version = None
        self._envelope = None
        await self._release()

    async def _release(self) -> None:
        events, self._events = self._events, None
        transport, self._transport = self._transport, None
        http, self._http = self._http, None
        try:
            if events is not None:
                await events.close()
            if transport is not None:
                await transport.close()
        finally:
            if http is not None:
                await http.aclose()
