"""An agent-side script using the toolgate Python SDK.

Over HTTP (a running ``toolgate mcp start --transport http``)::

    TOOLGATE_URL=http://127.0.0.1:7821 PYTHONPATH=sdk/python python3 examples/agent.py

Over stdio (starts its own server with ``deno run -A main.ts mcp start``)::

    PYTHONPATH=sdk/python python3 examples/agent.py

It runs ``$DENO``, else ``deno`` from PATH, else ``npx -y deno@2.9.6`` (Node
and npm only).

Set ``TOOLGATE_API_TOKEN`` when the server has one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import toolgate  # noqa: F401 (installed with `pip install ./sdk/python`)
except ImportError:  # running from a clone without installing
    sys.path.insert(0, str(ROOT / "sdk" / "python"))

from toolgate import Client, Event, ToolgateError  # noqa: E402


def make_client() -> Client:
    url = os.environ.get("TOOLGATE_URL")
    if url:
        return Client.http(url, token=os.environ.get("TOOLGATE_API_TOKEN") or None)
    deno = os.environ.get("DENO") or shutil.which("deno")
    command, prefix = (deno, []) if deno else ("npx", ["-y", "deno@2.9.6"])
    arguments = [*prefix, "run", "-A", str(ROOT / "main.ts"), "mcp", "start"]
    return Client.stdio(command, arguments, stderr="ignore")


async def main() -> None:
    async with make_client() as client:
        if client.transport == "http":

            def report(event: Event) -> None:
                outcome = (
                    f"{event.data['latency_ms']} ms"
                    if event.data["ok"]
                    else event.data["error_code"]
                )
                print(f"event: {event.data['tool']} finished: {outcome}")

            client.on("tool.complete", report)
            await client.events_ready()

        tools = await client.list_tools()
        print(f"{len(tools)} tools: {', '.join(tool.name for tool in tools)}")

        await client.call_tool("memory_set", key="agent:last_run", value={"by": "agent.py"})
        result = await client.call_tool("memory_get", key="agent:last_run")
        print(f"memory_get -> {result.content[0]['text']}")

        try:
            await client.call_tool("memory_get")  # missing the required key
        except ToolgateError as error:
            print(f"expected failure: {error.code}: {error.message}")
        await asyncio.sleep(0.2)  # let the last events arrive before closing


if __name__ == "__main__":
    asyncio.run(main())
