"""The asyncio API tests. ``tests/echomq/_sync`` is generated from them by scripts/unasync_gen.py."""
