"""The door of the bot: admit each update onto the commands queue, and nothing more.

Both entry points (the webhook and long polling) hand every update to
:meth:`Ingress.admit`, which admits it onto ``cm.commands`` on the chat's
**serial** lane (a chat's commands run one at a time, in order) under
:func:`~codemojex.bot.inbound.update_job_id`. A redelivered update is refused as
``DUPLICATE``, for as long as the queue keeps the finished job (``keep_done_ms``,
one hour; Telegram stops redelivering long before). No game logic runs here:
admission is one Lua script, so the endpoint answers in about a round trip.
"""

from __future__ import annotations

from typing import Any

from codemojex.bot.inbound import encode_inbound, from_update, update_job_id
from codemojex.service.context import SCORE_QUEUE, Services
from echomq import AsyncQueue, Verdict

__all__ = ["COMMANDS_QUEUE", "Ingress", "commands_queue"]

COMMANDS_QUEUE = "cm.commands"  # the inbound-command lane (beat 100 ms, lease 10 s)


def commands_queue(services: Services) -> AsyncQueue:
    """``cm.commands`` with the services' queue-name suffix (tests keep runs apart with it)."""
    suffix = services.scores.name.removeprefix(SCORE_QUEUE)
    return AsyncQueue(services.connector, COMMANDS_QUEUE + suffix)


class Ingress:
    """Admits updates of bot ``bot_id`` onto ``queue``; counts what it saw."""

    def __init__(self, queue: AsyncQueue, bot_id: int) -> None:
        self.queue = queue
        self.bot_id = bot_id
        self.admitted = 0
        self.duplicates = 0
        self.ignored = 0

    async def admit(self, update: Any) -> Verdict | None:
        """Admit one update (a decoded JSON object). None: not one the bot acts on.

        Raises only if Valkey cannot be reached (the caller answers so that
        Telegram delivers the update again).
        """
        inbound = from_update(update)
        if inbound is None:
            self.ignored += 1
            return None
        verdict = await self.queue.admit(update_job_id(self.bot_id, inbound.update_id),
                                         encode_inbound(inbound), lane=str(inbound.chat_id), serial=True)
        if verdict is Verdict.DUPLICATE:
            self.duplicates += 1
        else:
            self.admitted += 1
        return verdict
