"""The chaos run: the queue and the game under a random mix of real faults (issue 17).

``python scripts/chaos.py`` (see :mod:`codemojex.chaos.run`). Modules: ``faults`` (the
fault kinds), ``queuework`` and ``gamework`` (the load and the checks), ``worker`` and
``game_proc`` (the processes the faults kill).
"""
