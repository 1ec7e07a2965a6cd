"""The game's pure rules: no I/O, no environment, no clock.

emoji    emoji sets and a grapheme splitter for emoji
guess    parse/validate a typed guess, draw a secret
locks    overlay a player's exactly-found positions on a guess
scoring  100 − 20·d per position, out of 600
payouts  the sealed pass: pot + scored guesses → integer payouts
"""

from codemojex.domain.emoji import CLASSIC, DEFAULT_SETS, FOOD, EmojiSet, canonical, graphemes
from codemojex.domain.guess import SIZE, BadGuess, Guess, draw_secret, format_guess, parse_guess
from codemojex.domain.guess import validate as validate_guess
from codemojex.domain.locks import merge
from codemojex.domain.payouts import Payout, ScoredGuess, payout_ref, settle
from codemojex.domain.scoring import MAX_SCORE, Score, exact_positions, score, secret_hash

__all__ = [
    "CLASSIC",
    "DEFAULT_SETS",
    "FOOD",
    "MAX_SCORE",
    "SIZE",
    "BadGuess",
    "EmojiSet",
    "Guess",
    "Payout",
    "Score",
    "ScoredGuess",
    "canonical",
    "draw_secret",
    "exact_positions",
    "format_guess",
    "graphemes",
    "merge",
    "parse_guess",
    "payout_ref",
    "score",
    "secret_hash",
    "settle",
    "validate_guess",
]
