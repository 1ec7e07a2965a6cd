"""Amounts of money: ``int`` coins in range, or :class:`~codemojex.domain.errors.InvalidAmount`.

Every place an amount or a price enters the wallet (a round's price, a plan's
price, a grant, a charge, a payout) goes through :func:`amount` before the first
write. ``bool`` is refused although it is an ``int`` subclass; so are floats
(even ``2.0``), ``nan``, ``inf``, strings, negatives, zero where a positive is
needed, and anything above :data:`MAX_AMOUNT`. The bound keeps every sum the
audit takes (all the coins ever granted) far inside PostgreSQL's ``bigint``.
"""

from __future__ import annotations

from codemojex.domain.errors import InvalidAmount

__all__ = ["MAX_AMOUNT", "amount"]

MAX_AMOUNT = 10**12  # a trillion coins in one movement; bigint holds 9.2e18


def amount(value: object, what: str = "amount", *, zero: bool = False) -> int:
    """``value`` if it is an ``int`` (not a bool) in ``1..MAX_AMOUNT`` (``0..`` with
    ``zero=True``); otherwise raise :class:`InvalidAmount` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidAmount(f"{what} must be an integer number of coins, got {value!r}")
    low = 0 if zero else 1
    if not low <= value <= MAX_AMOUNT:
        raise InvalidAmount(f"{what} must be in {low}..{MAX_AMOUNT}, got {value}")
    return int(value)
