-- 0051: the bot runs as codemojex_game too (issue 25, item 6): an operator's void records
-- its round here and nothing else; the row is never changed or removed afterwards.
GRANT SELECT, INSERT ON voided_rounds TO codemojex_game;
