"""The asynchronous toolgate client."""

from __future__ import annotations

import inspect
import json
import logging
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Type

import httpx

from ._errors import ToolgateError, error_from_result
from ._events import EventStream
from ._sse import SseMessage
from ._transports import HttpTransport, JsonObject, StdioTransport, Transport, split_args
from ._types import EVENT_NAMES, SERVER_EVENT_TYPES, Event, EventHandler, Tool, ToolResult
from ._version import __version__

__all__ = ["Client"]

logger = logging.getLogger("toolgate")

#: Protocol version asked for in the handshake, and those accepted in reply.
_PROTOCOL_VERSION = "2025-06-18"
_SUPPORTED_VERSIONS = frozenset({"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"})


def _default_on_error(error: BaseException) -> None:
    logger.warning("toolgate: %s", error, exc_info=error)


def _session_gone(error: ToolgateError) -> bool:
    status = error.details.get("status") if isinstance(error.details, dict) else None
    return status == 404 and "session" in error.message.lower()


class Client:
    """An asynchronous toolgate client: list and call tools over MCP, and
    (over HTTP) subscribe to events.

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
    ) -> None:
        """Prefer :meth:`stdio` and :meth:`http`."""
        if (stdio is None) == (base_url is None):
            raise ToolgateError("USAGE", "Invalid client: give either stdio or base_url")
        if timeout <= 0:
            raise ToolgateError("USAGE", f"Invalid timeout: {timeout} is not positive")
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
        #: What the server said about itself in the handshake (``name``, ``version``).
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
    ) -> "Client":
        """A client that starts the server as a child process and speaks MCP on its stdio.

        :param command: The program, e.g. ``toolgate`` or ``deno``.
        :param args: Its arguments, e.g. ``["mcp", "start"]``.
        :param env: Extra environment variables (over this process's environment).
        :param cwd: Working directory of the child.
        :param stderr: ``"inherit"`` (the server's log lines show) or ``"ignore"``.
        :param timeout: Longest wait for one answer, in seconds.
        """
        if stderr not in ("inherit", "ignore"):
            raise ToolgateError(
                "USAGE", f'Invalid stderr {stderr!r}: expected "inherit" or "ignore"'
            )
        arguments = split_args(args)
        return cls(
            stdio=lambda: StdioTransport(command, arguments, env, cwd, stderr),
            timeout=timeout,
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
        """The MCP session id over HTTP (``Mcp-Session-Id``; also the
        ``session_id`` of this client's calls in ``tool.called`` events and
        the audit log)."""
        transport = self._transport
        return transport.session_id if isinstance(transport, HttpTransport) else None

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
            await self._handshake()
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

    async def _handshake(self) -> None:
        assert self._transport is not None
        result = await self._transport.request(
            "initialize",
            {
                "protocolVersion": _PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": self._name, "version": __version__},
            },
            self._timeout,
        )
        version = result.get("protocolVersion")
        if version not in _SUPPORTED_VERSIONS:
            raise ToolgateError(
                "MCP_ERROR", f"Unsupported protocol version {version!r} offered by the server"
            )
        self._transport.protocol_version = version
        info = result.get("serverInfo")
        self.server_info = dict(info) if isinstance(info, Mapping) else {}
        await self._transport.notify("notifications/initialized")

    async def _request(self, method: str, params: Optional[JsonObject]) -> JsonObject:
        transport = self._connection()
        try:
            return await transport.request(method, params, self._timeout)
        except ToolgateError as error:
            if self.transport != "http" or not _session_gone(error):
                raise
        # The server forgot the session (idle expiry, restart): open a new one, once.
        transport.reset_session()
        await self._handshake()
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
        """Closes the event stream and the MCP session (``DELETE /mcp``), or
        stops the stdio server. Handlers stay registered for a later :meth:`connect`."""
        self._connected = False
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
