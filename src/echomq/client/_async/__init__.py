"""The asyncio implementation. ``echomq/client/_sync`` is generated from it by scripts/unasync_gen.py."""
