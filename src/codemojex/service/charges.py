"""Charges in groups: the guesses submitted together share one transaction and one admission.

:class:`Charges` is the one way :func:`codemojex.service.submit` charges a guess. Concurrent
submissions gather (:class:`~codemojex.infra.groups.GroupCommit`): a flush charges every
guess of a round it carries in one transaction (:func:`codemojex.wallet.batch.charge_guesses`:
each guess checked and refused or charged alone, idempotent by its ref, its outbox row
written with its charge), then admits the charged guesses' jobs with one ``admit_many``
(the fast path, once per flush instead of once per guess). A submission alone is a flush of
one: no timer, no added wait.

A flush whose transaction fails for good (not a transient failure, which the wallet
retries) charges its guesses again one by one, so one guess that PostgreSQL refuses cannot
refuse the others with it.
"""

from __future__ import annotations

import logging

from psycopg_pool import AsyncConnectionPool

from codemojex.domain import Guess
from codemojex.domain.errors import DatabaseError, Unavailable
from codemojex.infra.groups import GroupCommit
from codemojex.service.codec import GuessJob, encode
from codemojex.wallet.batch import ChargeItem, ChargeOutcome, charge_guesses
from codemojex.wallet.results import Charged
from echomq import AsyncQueue, AsyncShardedQueue, outbox

__all__ = ["MAX_BATCH", "Charges", "outbox_job"]

log = logging.getLogger("codemojex.charges")

MAX_BATCH = 256  # guesses per transaction: bounded, so no flush holds many rows for long
FLUSHES = 2  # flushes in flight: one commits while the next gathers


def outbox_job(queue: AsyncQueue | AsyncShardedQueue, job_id: str, job: GuessJob) -> outbox.OutboxJob:
    """The outbox row of a charged guess: its id, on its player's serial lane of ``queue``
    (``cm``; of the shard that lane lives on when the queue is sharded)."""
    name = queue.shard_for(job_id, job.player).name if isinstance(queue, AsyncShardedQueue) else queue.name
    return outbox.OutboxJob(queue=name, payload=encode(job), lane=job.player, serial=True, job_id=job_id)


Charge = tuple[ChargeOutcome, Guess, bool]  # the outcome, the guess as charged, admitted at once


class Charges:
    """The charging door of the game (module docstring): charges in ``pool``, admits onto
    ``scores`` (the queue ``cm``)."""

    def __init__(self, pool: AsyncConnectionPool, scores: AsyncQueue | AsyncShardedQueue) -> None:
        self.pool = pool
        self.scores = scores
        self.group: GroupCommit[tuple[str, ChargeItem], Charge | DatabaseError] = GroupCommit(
            self._flush, max_items=MAX_BATCH, flushes=FLUSHES)

    async def charge(self, round_id: str, item: ChargeItem) -> Charge:
        """Charge ``item`` in ``round_id``: its outcome, the guess as charged (locks overlaid),
        and whether its job was admitted at once (else the outbox's relay admits it)."""
        result = await self.group.call((round_id, item))
        if isinstance(result, DatabaseError):
            raise result
        return result

    async def _flush(self, items: list[tuple[str, ChargeItem]]) -> list[Charge | DatabaseError]:
        """One result per item, in input order, by construction: the items are split by
        round (each position in exactly one round's list), each round's charge answers one
        result per item it was given (``zip(strict=True)``: a short answer is an error, not a
        gap), and the answer is read back by position. No check is left to ``assert``,
        which ``python -O`` strips."""
        by_round: dict[str, list[int]] = {}
        for i, (rid, _) in enumerate(items):
            by_round.setdefault(rid, []).append(i)
        placed: dict[int, Charge | DatabaseError] = {}
        for rid, at in by_round.items():
            placed.update(zip(at, await self._round(rid, [items[i][1] for i in at]), strict=True))
        return [placed[i] for i in range(len(items))]

    async def _round(self, rid: str, items: list[ChargeItem]) -> list[Charge | DatabaseError]:
        payloads: dict[str, bytes] = {}  # encoded once: the outbox row's and the admission's

        def job_of(item: ChargeItem, emojis: Guess) -> outbox.OutboxJob:
            job = outbox_job(self.scores, item.guess_id, GuessJob(rid, item.player, emojis))
            payloads[item.guess_id] = job.payload
            return job

        charged: list[tuple[ChargeOutcome, Guess] | DatabaseError]
        try:
            charged = list(await charge_guesses(self.pool, rid, items, job_of))
        except Unavailable as exc:  # past the bound: nothing was decided for any of them
            return [exc] * len(items)
        except DatabaseError as exc:
            if len(items) == 1:
                return [exc]
            log.warning("a charge of %d guesses failed (%s); charging them one by one", len(items), exc)
            charged = []
            for item in items:
                try:
                    charged += await charge_guesses(self.pool, rid, [item], job_of)
                except DatabaseError as one:
                    charged.append(one)
        jobs = [(item.guess_id, payloads.get(item.guess_id) or encode(GuessJob(rid, item.player, c[1])),
                 item.player)
                for item, c in zip(items, charged, strict=True)
                if not isinstance(c, DatabaseError) and isinstance(c[0], Charged)]
        admitted: set[str] = set()
        if jobs:
            try:
                verdicts = await self.scores.admit_many(jobs, serial=True)
                admitted = {j[0] for j, v in zip(jobs, verdicts, strict=True) if not isinstance(v, Exception)}
            except Exception as exc:  # the charges and their outbox rows stand; the relay admits them
                log.warning("%d guesses charged but not admitted (%r); left to the outbox's relay",
                            len(jobs), exc)
        return [c if isinstance(c, DatabaseError) else (c[0], c[1], item.guess_id in admitted)
                for item, c in zip(items, charged, strict=True)]
