"""What the bot says about a round's time, written as it is sent, on the server's clock.

Two notes speak of a round's time, and both can wait between being written and being sent:
behind the player's serial lane, behind the rate budget, or across a restart (a note
admitted by a bot killed before it sent it goes out once its lease runs out, 15 s later,
from the bot that took over). Written when admitted, a round answer said "open for 5s" of
a round that had closed, or "open for 0s"; a score notice said "final results at the
close" after the close. So the delivery writes them again at send time
(:class:`~codemojex.bot.telegram.TelegramDelivery`'s ``render``), from the round's
closing time (PostgreSQL's, through the cache tier: it never changes) and the Valkey
server's clock (:class:`~codemojex.bot.telegram.ServerClock`, measured again every 10 s),
the clock every timed step of the game runs on:

* the answer showing the round (``bot.round``, to ``/round`` and ``/start``):
  :func:`~codemojex.bot.replies.round_text` with the time left now; a round with less
  than a second left is said to be closing, one past its close to have closed, never
  "open for 0s";
* a score notice (``scores``): written by :meth:`~codemojex.bot.announce.ScoreBatcher.render`
  (or dropped there: the player's result is out); sent after the round's close it says
  the round has closed and the result follows (:func:`~codemojex.bot.replies.scores_after_close`).
  That is true when it is sent: the result is not out (else the notice is dropped), and
  on the player's serial lane the result waits behind the notice being sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from codemojex.bot import replies
from codemojex.bot.telegram import BotState, ServerClock
from codemojex.domain.emoji import default_set
from codemojex.domain.errors import DatabaseError
from codemojex.service import Services, round_of
from codemojex.service.codec import Note
from codemojex.wallet.rounds import Round

__all__ = ["RoundClock"]

log = logging.getLogger("codemojex.bot.roundclock")

Render = Callable[[Note], Awaitable[str | None]]


class RoundClock:
    """The ``render`` hooks of the round answer and the score notice (module docstring).
    ``scores``: the notice's own writer (the score batcher's ``render``)."""

    def __init__(self, services: Services, state: BotState, *, scores: Render | None = None,
                 clock: ServerClock | None = None) -> None:
        self.services = services
        self.state = state
        self.clock = clock or ServerClock(state.connector)
        self._scores = scores
        self.closing = 0  # round answers sent as closing or closed (this process)
        self.after_close = 0  # score notices sent after their round's close (this process)

    async def now(self) -> datetime:
        """The Valkey server's clock now (measured again if the last measure is 10 s old)."""
        await self.clock.calibrate()
        return datetime.fromtimestamp(await self.clock.now_ms() / 1000, UTC)

    async def _round(self, rid: str) -> Round | None:
        """Round ``rid`` (the cache tier first), None if there is none or PostgreSQL cannot
        say now (the note then goes as it was written: an answer late is worse)."""
        if not rid:
            return None
        try:
            return await round_of(self.services, rid)
        except DatabaseError as exc:
            log.info("round %s not read (%r); its note is sent as written", rid, exc)
            return None

    async def round(self, note: Note) -> str | None:
        """The answer showing round ``note.round_id``, with the time left now. A note naming
        no round this process can read is sent as it was written."""
        rnd = await self._round(note.round_id)
        emoji_set = None if rnd is None else default_set(rnd.emoji_set)
        if rnd is None or emoji_set is None:
            return note.text
        now = await self.now()
        if rnd.closes_at - now < timedelta(seconds=1):  # round_text's threshold
            self.closing += 1
        lang = await self.state.language_of(note.player)
        return replies.round_text(rnd.id, emoji_set, rnd.guess_price, rnd.closes_at, now, lang)

    async def scores(self, note: Note) -> str | None:
        """The score notice as its writer wrote it (None: not sent), saying the round has
        closed if it is sent after the close."""
        said = note.text if self._scores is None else await self._scores(note)
        if said is None:
            return None
        rnd = await self._round(note.round_id)
        if rnd is None or rnd.closes_at > await self.now():
            return said
        self.after_close += 1
        return replies.scores_after_close(said)

