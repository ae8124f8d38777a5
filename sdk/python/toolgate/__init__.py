"""The toolgate Python SDK: an asynchronous client for toolgate's tools and
events, and a verifier for its webhook signatures.

- :class:`Client`: ``async with Client.stdio(command, args)`` or
  ``async with Client.http(base_url, token=None)``; ``await call_tool(name,
  **args)``, ``await list_tools()``, ``on(event, handler)`` (HTTP only).
- :class:`ToolgateError`: every failure, with the server's stable ``code``.
- :func:`verify_signature`: checks ``X-Service-Signature`` on a receiver.

Example::

    import asyncio
    from toolgate import Client, ToolgateError

    async def main() -> None:
        async with Client.http("http://127.0.0.1:7821") as client:
            client.on("circuit.opened", lambda event: print("failing:", event.data["tool_name"]))
            try:
                result = await client.call_tool("http_request", url="https://example.com")
                print(result.structured_content["status"])
            except ToolgateError as error:
                print(error.code, error.message)

    asyncio.run(main())
"""

from ._client import Client
from ._errors import ToolgateError
from ._signature import verify_signature
from ._sse import SseMessage, SseParser
from ._types import EVENT_NAMES, SERVER_EVENT_TYPES, Event, EventHandler, Tool, ToolResult
from ._version import __version__

__all__ = [
    "Client",
    "EVENT_NAMES",
    "Event",
    "EventHandler",
    "SERVER_EVENT_TYPES",
    "SseMessage",
    "SseParser",
    "Tool",
    "ToolResult",
    "ToolgateError",
    "__version__",
    "verify_signature",
]
