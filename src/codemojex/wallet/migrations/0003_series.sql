-- 0003: the series of rounds lives in PostgreSQL (issue 25, item 2).
--
-- A series is the plan the rounds follow (their length, gap, price, how many, the
-- start grant and the daily top-up) and where it stands (the index of the next round
-- to open). The round opener locks its series' row, so openers run one at a time per
-- series, and two indexes make the rules the server's own:
--
-- * one live series per name (``running`` or ``paused``): two starts of the bot (or
--   a restart racing an old start) find the same series instead of making a second;
-- * at most one open round per series: whatever job runs late or twice, a second
--   round of the series cannot be open while another is.

CREATE TABLE series (
    id           text PRIMARY KEY,
    name         text NOT NULL,
    state        text NOT NULL DEFAULT 'running',
    round_ms     integer NOT NULL,
    gap_ms       integer NOT NULL DEFAULT 0,
    price        bigint NOT NULL,
    rounds       integer,                    -- NULL: unlimited
    start_grant  bigint NOT NULL DEFAULT 0,
    daily_topup  bigint NOT NULL DEFAULT 0,
    emoji_set    text NOT NULL,
    next_index   integer NOT NULL DEFAULT 0, -- the index of the next round to open
    epoch        integer NOT NULL DEFAULT 0, -- bumped by a resume: the open job's id changes
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT series_state CHECK (state IN ('running', 'paused', 'finished')),
    CONSTRAINT series_round_ms CHECK (round_ms > 0),
    CONSTRAINT series_gap_ms CHECK (gap_ms >= 0),
    CONSTRAINT series_price CHECK (price > 0),
    CONSTRAINT series_rounds CHECK (rounds IS NULL OR rounds > 0),
    CONSTRAINT series_grants CHECK (start_grant >= 0 AND daily_topup >= 0),
    CONSTRAINT series_next CHECK (next_index >= 0 AND (rounds IS NULL OR next_index <= rounds))
);
CREATE UNIQUE INDEX series_one_live_per_name ON series (name) WHERE state <> 'finished';

ALTER TABLE rounds ADD COLUMN series_id text REFERENCES series (id),
                   ADD COLUMN series_index integer;
CREATE UNIQUE INDEX rounds_one_open_per_series ON rounds (series_id) WHERE state = 'open';
CREATE UNIQUE INDEX rounds_series_index ON rounds (series_id, series_index);
