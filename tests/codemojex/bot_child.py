"""A notifier process for the kill -9 tests: drains the notify queue through the Telegram
delivery against the stand-in, with a 1 s lease.

    python -m tests.codemojex.bot_child MODE

Environment: ``CMX_VALKEY_URL``, ``CMX_QUEUE``, ``CMX_API_BASE``, ``CMX_TOKEN``, ``CMX_NS``.

* ``plain``: an ordinary notifier (the test kills it while the stand-in holds a send).
* ``after-send``: dies by SIGKILL right after the first delivery returned, before the ack.
* ``before-send``: dies by SIGKILL as its first request would leave (every check done).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from codemojex.bot import BotState, BudgetOptions, TelegramDelivery, make_bot
from codemojex.workers import NotifyWorker
from echomq import AsyncConnector, AsyncQueue
from echomq.core.model import Lease
from echomq.core.outcomes import Outcome
from echomq.runtime.consumer import Consumer, ConsumerOptions

CHILD_OPTIONS = ConsumerOptions(beat_ms=50, lease_ms=1000, concurrency=1)


async def main(mode: str) -> None:
    env = os.environ
    connector = AsyncConnector.from_url(env["CMX_VALKEY_URL"])
    opts = BudgetOptions(namespace=env["CMX_NS"], overall=100, per_chat=100, margin_ms=0)
    bot = make_bot(env["CMX_TOKEN"], env["CMX_API_BASE"])
    delivery = TelegramDelivery(bot, BotState(connector, opts.namespace))
    worker = NotifyWorker(delivery)
    if mode == "before-send":
        async def die(**_: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        bot.send_message = die  # type: ignore[method-assign]

    async def handler(lease: Lease) -> Outcome:
        outcome = await worker.handle(lease)
        if mode == "after-send":
            os.kill(os.getpid(), signal.SIGKILL)
        return outcome

    await Consumer(AsyncQueue(connector, env["CMX_QUEUE"]), handler, options=CHILD_OPTIONS).run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
