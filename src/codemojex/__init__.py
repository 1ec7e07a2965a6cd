"""Codemojex: a Telegram emoji-guessing game that runs on EchoMQ.

Layers: ``codemojex.domain`` holds the pure rules (emoji sets, guesses, locks,
scoring, payouts; no I/O), ``codemojex.wallet`` the PostgreSQL money layer,
``codemojex.infra.pg`` the embedded/external server and pool factory. Importing this
package has no side effects.
"""
