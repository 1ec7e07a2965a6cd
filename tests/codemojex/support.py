"""Test helpers: throwaway databases and unique ids."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from codemojex.wallet import admin

T = TypeVar("T")


def _db_name(prefix: str) -> str:
    return f"{re.sub(r'[^a-z0-9_]', '_', prefix.lower())[:30]}_{uuid.uuid4().hex[:8]}"


def _blocking(call: Coroutine[Any, Any, T]) -> T:
    """Run a wallet coroutine to its end from blocking code, on a thread of its own (so
    that no event loop of the caller's thread is replaced or closed)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, call).result()


def make_database(admin_url: str, prefix: str) -> str:
    """Create a fresh empty database (``wallet.admin``, the game's own SQL); return its name."""
    name = _db_name(prefix)
    _blocking(admin.create_database(admin_url, name))
    return name


def drop_database(admin_url: str, name: str) -> None:
    _blocking(admin.drop_database(admin_url, name))


def new_id(kind: str = "JOB") -> str:
    """A unique id for a test row (not a branded id; the wallet does not require one)."""
    return f"{kind}{uuid.uuid4().hex.upper()}"
