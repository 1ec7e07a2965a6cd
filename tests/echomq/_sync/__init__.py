# Generated from tests/echomq/_async/__init__.py by scripts/unasync_gen.py. Do not edit.
"""The blocking API tests, generated from tests/echomq/_async."""
