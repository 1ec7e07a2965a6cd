"""The notifiers' rate budget: Telegram's limits, kept by EchoMQ's claim gate.

Telegram allows a bot about 30 messages per second overall and about one per second per
chat; past that it answers 429. The budget is no script of the game's own: it is the
rate limits of the notifications queue (``Queue.set_limits``, docs/decisions/0022-claim-gate.md),
enforced inside EchoMQ's claim on the **server clock**, shared by every notifier process:

* at most ``overall`` leases of the queue in any window of ``window_ms + margin_ms``, and
  at most ``per_chat`` of one lane: every note is admitted on its player's lane, and a
  Telegram player's lane is their chat (``tg:<chat>``);
* a note held back stays pending, with no attempt counted, and the notifiers park until
  the claim says the next token is due;
* every request to Telegram is one lease: a 429 defers the note through the queue
  (no failure counted) instead of sending it again in place, so the leases are the sends.

The window is padded by ``margin_ms`` (default 250 ms): a lease is taken just before the
HTTP request leaves, and requests reach Telegram after a variable delay; padding the
window by more than that variation keeps the budget true *where Telegram measures it*.
With a 100 ms margin the season test (``tests/codemojex/test_bot_season.py``, a loaded
2-core machine) counted 37 sends in one second and two sends to one chat 0.84 s apart at
the stand-in; 250 ms costs a sixth of the rate (24/s sustained) and keeps both limits.
The variation is bounded on the sending side too:

* a lease older than ``stale_ms`` (on the server's clock) when its request would leave is
  not used (:class:`~codemojex.bot.telegram.TelegramDelivery`), so a notifier that stalled
  after its claim cannot send late grants in a burst with fresh ones;
* each process keeps its own record of its sends over the same padded window
  (:class:`~codemojex.bot.telegram.LocalWindow`), checked just before each request: it
  holds the budget while the gate's state is lost (a Valkey restarted from its AOF).
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq import AsyncQueue, Gate, RateLimit

__all__ = ["BudgetOptions", "apply_budget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetOptions:
    """Telegram's published limits: about 30 messages/s per bot, 1/s per chat.

    ``margin_ms`` pads the window (see the module doc); ``namespace`` separates bots (or
    test runs) sharing one Valkey in the bot's own keys (blocked chats, sent markers).
    """

    overall: int = 30
    per_chat: int = 1
    window_ms: int = 1000
    margin_ms: int = 250
    namespace: str = "telegram"
    stale_ms: int | None = 1000  # None: send on any lease, however long it waited

    def __post_init__(self) -> None:
        if self.overall < 1 or self.per_chat < 1 or self.window_ms < 1 or self.margin_ms < 0:
            raise ValueError("overall, per_chat and window_ms must be >= 1, margin_ms >= 0")
        if not self.namespace or any(c in self.namespace for c in "{}") or not self.namespace.isprintable():
            raise ValueError(f"bad namespace {self.namespace!r}")

    def limits(self) -> tuple[RateLimit, RateLimit]:
        """(the queue's limit, a lane's limit), each over the padded window."""
        window = self.window_ms + self.margin_ms
        return RateLimit(self.overall, window), RateLimit(self.per_chat, window)


async def apply_budget(queue: AsyncQueue, options: BudgetOptions) -> Gate:
    """Set the budget as ``queue``'s rate limits (idempotent; every notifier may call it)."""
    rate, per_chat = options.limits()
    return await queue.set_limits(rate=rate, lane_rate=per_chat)
