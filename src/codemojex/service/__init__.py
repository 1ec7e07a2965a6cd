"""The game's service layer: the door of a guess and the round schedule.

guesses  ``submit``: validate, lock-merge, charge, admit (or one closed error, with its detail)
players  ``start``, ``balance``, ``leaderboard``: the bot's other questions
         (a charged guess's job is written into the outbox `cm_outbox` with its charge)
series   the one series of rounds (settings, next round) in PostgreSQL: start/resume, pause
rounds   series of rounds opened and closed by delayed jobs; close-and-settle; the
         current round and a round by id, read from the cache tier first
codec    JSON payloads and derived (deterministic) job ids
context  ``Services``: the pool, the connector, the queues, the cache tier
"""

from codemojex.service.codec import derive_id
from codemojex.service.context import NOTIFY_QUEUE, SCORE_QUEUE, SETTLE_QUEUE, Services
from codemojex.service.guesses import Admitted, Refusal, admit_guess, submit
from codemojex.service.players import Started, balance, leaderboard, start
from codemojex.service.rounds import (
    RoundPlan,
    close_and_settle,
    closed_key,
    current_round,
    open_round,
    round_id,
    round_of,
    schedule,
)
from codemojex.service.series import (
    SeriesSettings,
    SeriesStatus,
    kick,
    pause_series,
    resume_series,
    series_status,
    start_series,
)

__all__ = [
    "NOTIFY_QUEUE",
    "SCORE_QUEUE",
    "SETTLE_QUEUE",
    "Admitted",
    "Refusal",
    "RoundPlan",
    "SeriesSettings",
    "SeriesStatus",
    "Services",
    "Started",
    "admit_guess",
    "balance",
    "close_and_settle",
    "closed_key",
    "current_round",
    "derive_id",
    "kick",
    "leaderboard",
    "open_round",
    "pause_series",
    "resume_series",
    "round_id",
    "round_of",
    "schedule",
    "series_status",
    "start",
    "start_series",
    "submit",
]
