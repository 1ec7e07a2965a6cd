"""A child process that dies by SIGKILL at a chosen point (for the crash tests).

    python -m tests.codemojex.crash_child MODE [ARGS...]

Environment: ``CMX_PG_URL``, ``CMX_VALKEY_URL``, ``CMX_SUFFIX`` (queue suffix).

* ``submit ROUND PLAYER``: submit a guess; die after the charge commits, before admission.
* ``score``: consume the score queue; die after the first job's handler ran, before its ack.
* ``settle-before``: consume the settle queue; die after the one-shot SET NX and the
  close, just before the settlement transaction.
* ``settle-after``: consume the settle queue; die after settling, before the ack.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import codemojex.service.rounds as rounds_mod
from codemojex.infra.pg import open_pool
from codemojex.service import Services, submit
from codemojex.workers import ScoreWorker, SettleWorker
from echomq import AsyncConnector
from echomq.core.model import Lease
from echomq.core.outcomes import Outcome
from echomq.runtime.consumer import Consumer, ConsumerOptions

CHILD_OPTIONS = ConsumerOptions(beat_ms=50, lease_ms=1000, concurrency=1)


def die(*_: Any, **__: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


async def main(mode: str, args: list[str]) -> None:
    pool = await open_pool(os.environ["CMX_PG_URL"], min_size=1, max_size=4)
    services = Services(pool, AsyncConnector.from_url(os.environ["CMX_VALKEY_URL"]),
                        suffix=os.environ["CMX_SUFFIX"])
    if mode == "submit":
        # The charges admit their jobs with one admit_many after the commit: die there.
        services.scores.admit_many = die  # type: ignore[method-assign]
        await submit(services, args[0], args[1], "🍕🍩🚀⚽🎸❤️")
        raise SystemExit("submit returned: the crash point was not reached")
    if mode == "score":
        real = ScoreWorker(services).handle
        queue = services.scores
    else:
        real = SettleWorker(services).handle
        queue = services.settlements
        if mode == "settle-before":
            rounds_mod.settle_round = die  # type: ignore[assignment]

    async def handler(lease: Lease) -> Outcome:
        outcome = await real(lease)
        print(f"handled {lease.id} attempt {lease.attempt}: {outcome!r}", file=sys.stderr, flush=True)
        die()
        return None

    await Consumer(queue, handler, options=CHILD_OPTIONS).run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
