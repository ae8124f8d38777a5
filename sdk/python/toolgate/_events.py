"""The ``GET /events`` reader: SSE over httpx streaming, reconnecting with ``Last-Event-ID``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Awaitable, Callable, Dict, Optional

import httpx

from ._errors import ToolgateError, error_from_http
from ._sse import SseMessage, SseParser

__all__ = ["EventStream"]

#: Statuses after which reconnecting cannot help.
_FATAL_STATUSES = frozenset({400, 401, 403, 404, 405, 406})
_FATAL_CODES = frozenset({"UNAUTHORIZED", "FORBIDDEN", "USAGE"})

#: The server sends a keep-alive comment every 15 s: a read this long means a dead connection.
_READ_TIMEOUT = 60.0


class EventStream:
    """Reads an SSE stream; when it ends or fails, waits and reconnects with
    ``Last-Event-ID`` so the server can replay what was missed. The wait
    doubles (up to a limit) while connecting keeps failing."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        on_message: Callable[[SseMessage], Awaitable[None]],
        on_error: Callable[[BaseException], None],
        reconnect_delay: float = 1.0,
        max_reconnect_delay: float = 30.0,
    ) -> None:
        self._http = http
        self._url = url
        self._on_message = on_message
        self._on_error = on_error
        self._reconnect_delay = reconnect_delay
        self._max_reconnect_delay = max_reconnect_delay
        self._task: Optional[asyncio.Task[None]] = None
        self._ready: Optional[asyncio.Future[None]] = None
        #: The id of the last event received.
        self.last_event_id = ""

    def start(self) -> None:
        """Starts reading in a background task (idempotent; needs a running loop)."""
        if self._task is not None:
            return
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        # A fatal error is also reported to on_error: never warn that it went unread.
        self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._task = loop.create_task(self._run())

    async def ready(self) -> None:
        """Returns once the first connection is open; raises on a fatal error."""
        self.start()
        assert self._ready is not None
        await asyncio.shield(self._ready)

    async def close(self) -> None:
        """Stops reading and waits for the reader to finish."""
        task, self._task = self._task, None
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(
                ToolgateError("USAGE", "Event stream closed before it opened")
            )
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        delay = self._reconnect_delay
        server_retry: Optional[float] = None
        while True:
            healthy = False
            try:
                retry_ms = await self._read()
                healthy = True
                if retry_ms is not None:
                    server_retry = retry_ms / 1000
            except ToolgateError as error:
                status = error.details.get("status") if isinstance(error.details, dict) else None
                if error.code in _FATAL_CODES or status in _FATAL_STATUSES:
                    if self._ready is not None and not self._ready.done():
                        self._ready.set_exception(error)
                    self._on_error(error)
                    return
                self._on_error(error)
            except (httpx.HTTPError, httpx.StreamError, ValueError) as exc:
                self._on_error(ToolgateError("CONNECTION_FAILED", f"Event stream failed: {exc}"))
            base = server_retry if server_retry is not None else self._reconnect_delay
            delay = base if healthy else min(max(delay * 2, base), self._max_reconnect_delay)
            await asyncio.sleep(delay)

    async def _read(self) -> Optional[int]:
        headers: Dict[str, str] = {"Accept": "text/event-stream"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        timeout = httpx.Timeout(10.0, read=_READ_TIMEOUT)
        async with self._http.stream(
            "GET", self._url, headers=headers, timeout=timeout
        ) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                raise error_from_http(response.status_code, text)
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(None)
            parser = SseParser(self.last_event_id)
            async for chunk in response.aiter_text():
                for message in parser.push(chunk):
                    self.last_event_id = message.last_event_id
                    await self._on_message(message)
            return parser.retry_ms
