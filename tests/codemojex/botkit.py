"""Helpers for the bot tests: a running bot against the stand-in, polling for conditions."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from codemojex.bot import BotApp, BotSettings, BudgetOptions, StandIn
from codemojex.service import Services
from tests.codemojex.game import eventually

FAST_BUDGET = dict(overall=200, per_chat=50, margin_ms=0)  # conversations: the budget is not under test


def namespace(services: Services) -> str:
    """A rate-budget namespace of this test's own."""
    return f"t-{services.scores.name}"


def settings(services: Services, api: StandIn, **overrides: Any) -> BotSettings:
    budget = overrides.pop("budget", None) or BudgetOptions(namespace=namespace(services), **FAST_BUDGET)
    base = BotSettings(token=api.token, api_base=api.base, mode="polling", poll_timeout_s=1, budget=budget)
    return dataclasses.replace(base, **overrides)


@asynccontextmanager
async def running_bot(services: Services, api: StandIn, **overrides: Any) -> AsyncIterator[BotApp]:
    """The whole bot (game tree, command consumer, ingress) against the stand-in."""
    app = BotApp(services, settings(services, api, **overrides))
    task = asyncio.create_task(app.run())
    try:
        yield app
    finally:
        app.stop()
        await task
        await app.aclose()


def user_id() -> int:
    """A Telegram user id no other test uses."""
    return random.randrange(10**8, 10**9)


async def until(check: Callable[[], bool], *, timeout_s: float = 20.0, what: str = "condition") -> None:
    async def ok() -> bool:
        return check()

    await eventually(ok, timeout_s=timeout_s, what=what)
