"""The player's side of the service layer: what the bot asks for besides a guess.

``start`` registers a player and grants the starting coins once; ``balance`` and
``leaderboard`` read the wallet; ``current_round`` (in :mod:`.rounds`) reads the
round being played from the cache tier first. The bot calls these and
:func:`~codemojex.service.submit`, never the wallet itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.service.context import Services
from codemojex.wallet import Granted, ensure_player, grant_start, reads
from codemojex.wallet import balance as wallet_balance

__all__ = ["Started", "balance", "leaderboard", "start"]


@dataclass(frozen=True, slots=True)
class Started:
    """A player after ``/start``: the balance now, and the coins granted by this call
    (None when the start grant was made before: it is made once per player)."""

    balance: int
    granted: int | None


async def start(services: Services, player: str, *, name: str, chat_id: int | None,
                coins: int) -> Started:
    """Register ``player`` (idempotent) and grant ``coins`` once per player."""
    await ensure_player(services.pool, player, name=name, chat_id=chat_id)
    granted = await grant_start(services.pool, player, coins)
    now = await wallet_balance(services.pool, player) or 0
    return Started(now, coins if isinstance(granted, Granted) else None)


async def balance(services: Services, player: str) -> int | None:
    """The player's coins, or None for a player who never started."""
    return await wallet_balance(services.pool, player)


async def leaderboard(services: Services, limit: int = 10) -> list[tuple[str, str, int]]:
    """The ``limit`` richest players: (id, name, balance), richest first."""
    return await reads.leaderboard(services.pool, limit)
