# Generated from echomq/client/_async/__init__.py by scripts/unasync_gen.py. Do not edit.
"""The blocking implementation, generated from echomq/client/_async."""
