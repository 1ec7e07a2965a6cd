"""The notifiers' rate budget, shared by every notifier process, kept in Valkey.

Telegram allows a bot about 30 messages per second overall and about one per
second per chat; past that it answers 429. :class:`RateBudget` asks Valkey, in one
Lua script, whether a message to a chat may leave *now*:

* Two sliding-window logs (sorted sets of grant times on the **server clock**):
  one for the bot, one per chat. A grant is recorded in both, atomically, only
  if both have room; so across all processes no window of ``window_ms`` ever
  holds more than ``overall`` grants, nor more than ``per_chat`` for one chat.
* The window is padded by ``margin_ms`` (default 100 ms). A grant is taken just
  before the HTTP request leaves, and requests reach Telegram after a variable
  delay; padding the window by more than that variation keeps the budget true
  *where Telegram measures it*, not only where we do.
* Otherwise the answer is how long to wait until the oldest grant in the way
  leaves the window: the notifier defers the message by that long (no failure
  counted). Nothing is recorded for a refusal, so waiting costs no budget.

Keys: ``cm:rate:{<ns>}:all`` and ``cm:rate:{<ns>}:chat:<chat>``; both carry the
hash tag ``{<ns>}``, so the script is single-slot on a cluster, and both are
declared in KEYS. They expire two windows after the last grant.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from echomq import AsyncClusterConnector, AsyncConnector
from echomq.scripts import Script, parse

__all__ = ["SCRIPT", "BudgetOptions", "RateBudget"]

_SOURCE = """#!lua
-- name: rate_budget
-- summary: grant one message to a chat if the bot-wide and the chat's sliding
--   windows both have room (server clock), recording the grant in both
-- KEYS[1] all: sorted set, grant times (ms) of the whole bot
-- KEYS[2] chat: sorted set, grant times (ms) of one chat
-- ARGV[1] token: a unique member for this grant
-- ARGV[2] overall: grants allowed per window for the bot (>= 1)
-- ARGV[3] per_chat: grants allowed per window for one chat (>= 1)
-- ARGV[4] window_ms: the window, margin included (>= 1)
-- RETURNS: 0 granted | n > 0 the milliseconds until a grant can succeed (nothing recorded)
-- ERRORS: EMQARG a malformed argument; nothing written
local overall, per_chat, window = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not overall or overall < 1 or not per_chat or per_chat < 1 or not window or window < 1
   or ARGV[1] == '' then
  return redis.error_reply('EMQARG rate_budget: bad limits or token')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function wait_for(key, limit)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local n = redis.call('ZCARD', key)
  if n < limit then return 0 end
  -- the (n - limit + 1)-th oldest grant must leave the window first
  local at = redis.call('ZRANGE', key, n - limit, n - limit, 'WITHSCORES')
  return math.max(1, tonumber(at[2]) + window - now + 1)
end
local wait = math.max(wait_for(KEYS[1], overall), wait_for(KEYS[2], per_chat))
if wait > 0 then return wait end
local member = now .. ':' .. ARGV[1]
redis.call('ZADD', KEYS[1], now, member)
redis.call('ZADD', KEYS[2], now, member)
redis.call('PEXPIRE', KEYS[1], 2 * window)
redis.call('PEXPIRE', KEYS[2], 2 * window)
return 0
"""

SCRIPT: Script = parse("rate_budget", _SOURCE)
"""The budget's script, checked by echomq's contract parser (and run EVALSHA-first)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetOptions:
    """Telegram's published limits: about 30 messages/s per bot, 1/s per chat.

    ``margin_ms`` pads the window (see the module doc); ``namespace`` separates
    bots (or test runs) sharing one Valkey.
    """

    overall: int = 30
    per_chat: int = 1
    window_ms: int = 1000
    margin_ms: int = 100
    namespace: str = "telegram"

    def __post_init__(self) -> None:
        if self.overall < 1 or self.per_chat < 1 or self.window_ms < 1 or self.margin_ms < 0:
            raise ValueError("overall, per_chat and window_ms must be >= 1, margin_ms >= 0")
        if not self.namespace or any(c in self.namespace for c in "{}") or not self.namespace.isprintable():
            raise ValueError(f"bad namespace {self.namespace!r}")


class RateBudget:
    """Asks the shared budget for one message at a time. Holds no connection of its own."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector,
                 options: BudgetOptions | None = None) -> None:
        self.connector = connector
        self.options = options or BudgetOptions()
        self._prefix = f"cm:rate:{{{self.options.namespace}}}:"

    def keys(self, chat_id: int) -> list[str]:
        return [self._prefix + "all", f"{self._prefix}chat:{chat_id}"]

    async def acquire(self, chat_id: int) -> int:
        """0 if a message to ``chat_id`` may be sent now (the grant is recorded),
        else the milliseconds to wait before asking again."""
        o = self.options
        reply = await self.connector.eval(
            SCRIPT, self.keys(chat_id),
            [secrets.token_hex(6), o.overall, o.per_chat, o.window_ms + o.margin_ms])
        return int(reply)
