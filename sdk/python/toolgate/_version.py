"""The SDK's version: the toolgate version it ships with (``deno.json``)."""

__version__ = "0.1.0"
