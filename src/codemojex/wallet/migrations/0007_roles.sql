-- 0007: the game runs as codemojex_game, a role that cannot rewrite money history
-- (issue 25, item 6). Migrations run as codemojex_owner, which owns every table, so
-- only the owner can ALTER a table or disable its triggers.
--
-- The money history (ledger, movements, payouts) is INSERT and SELECT only. A guess
-- is too, but for its bookkeeping columns (admitted, scored, notified): its player,
-- round, emojis and charge cannot change. A player's balance, a round's state and
-- pot, a series' settings and the reconciler's memory change as the game plays.
-- No DELETE or TRUNCATE anywhere.
GRANT SELECT, INSERT ON ledger, movements, payouts, locks TO codemojex_game;
GRANT SELECT, INSERT ON guesses TO codemojex_game;
GRANT UPDATE (admitted_at, score, scored_at, notified_at) ON guesses TO codemojex_game;
GRANT SELECT, INSERT ON players TO codemojex_game;
GRANT UPDATE (balance, name, chat_id) ON players TO codemojex_game;
GRANT SELECT, INSERT ON rounds TO codemojex_game;
GRANT UPDATE (state, pot, settled_at, series_id, series_index) ON rounds TO codemojex_game;
GRANT SELECT, INSERT, UPDATE ON series, reconcile_jobs TO codemojex_game;
GRANT SELECT ON schema_migrations TO codemojex_game;
GRANT USAGE ON SEQUENCE guesses_seq, ledger_id_seq TO codemojex_game;
