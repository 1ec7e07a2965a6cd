"""The game's service layer: the door of a guess, the relay and the round schedule.

guesses  ``submit``: validate, lock-merge, charge, admit (or one closed error)
relay    admits guesses whose charge committed but whose admission did not happen
rounds   series of rounds opened and closed by delayed jobs; close-and-settle
codec    JSON payloads and derived (deterministic) job ids
context  ``Services``: the pool, the connector, the queues, the cache tier
"""

from codemojex.service.codec import derive_id
from codemojex.service.context import NOTIFY_QUEUE, SCORE_QUEUE, SETTLE_QUEUE, Services
from codemojex.service.guesses import Admitted, admit_guess, submit
from codemojex.service.relay import Relay, relay_once
from codemojex.service.rounds import RoundPlan, close_and_settle, closed_key, open_round, round_id, schedule

__all__ = [
    "NOTIFY_QUEUE",
    "SCORE_QUEUE",
    "SETTLE_QUEUE",
    "Admitted",
    "Relay",
    "RoundPlan",
    "Services",
    "admit_guess",
    "close_and_settle",
    "closed_key",
    "derive_id",
    "open_round",
    "relay_once",
    "round_id",
    "schedule",
    "submit",
]
