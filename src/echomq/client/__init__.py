"""The client: connectors (single server and cluster), the wire, queues.

Asyncio is written once (``_async``); the blocking API (``_sync``) is generated from it.
"""
