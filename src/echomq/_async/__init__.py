"""The asyncio implementation. ``echomq/_sync`` is generated from it by scripts/unasync_gen.py."""
