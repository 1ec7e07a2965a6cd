-- 0001_wallet: players, rounds, the double-entry ledger, guesses, locks, payouts.
-- Money is bigint coins. Accounts in the ledger are text: 'player:<id>',
-- 'round:<id>' (the round's pot) and 'house' (where granted coins come from).

CREATE TABLE players (
    id          text PRIMARY KEY,
    chat_id     bigint,
    name        text NOT NULL DEFAULT '',
    balance     bigint NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT players_non_negative CHECK (balance >= 0)
);

CREATE TABLE rounds (
    id           text PRIMARY KEY,
    emoji_set    text NOT NULL,
    secret       text[] NOT NULL,
    opens_at     timestamptz NOT NULL,
    closes_at    timestamptz NOT NULL,
    state        text NOT NULL DEFAULT 'open',
    guess_price  bigint NOT NULL,
    pot          bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    settled_at   timestamptz,
    CONSTRAINT rounds_state CHECK (state IN ('open', 'closed', 'settled')),
    CONSTRAINT rounds_secret_six CHECK (cardinality(secret) = 6),
    CONSTRAINT rounds_window CHECK (closes_at > opens_at),
    CONSTRAINT rounds_price_positive CHECK (guess_price > 0),
    CONSTRAINT rounds_pot_non_negative CHECK (pot >= 0)
);

-- One row per money movement; ref is the idempotency key ('guess:<id>',
-- 'start:<player>', 'payout:<round>:<player>', ...): a retried movement
-- conflicts here and applies nothing.
CREATE TABLE movements (
    ref         text PRIMARY KEY,
    kind        text NOT NULL,
    amount      bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT movements_kind CHECK (kind IN ('grant', 'charge', 'payout')),
    CONSTRAINT movements_amount_positive CHECK (amount > 0)
);

CREATE TABLE ledger (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ref         text NOT NULL REFERENCES movements (ref),
    account     text NOT NULL,
    amount      bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_amount_non_zero CHECK (amount <> 0),
    CONSTRAINT ledger_one_leg_per_account UNIQUE (ref, account)
);
CREATE INDEX ledger_account ON ledger (account);

-- Double entry, enforced at commit: the legs of every movement sum to zero.
CREATE FUNCTION ledger_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT coalesce(sum(amount), 0) FROM ledger WHERE ref = NEW.ref) <> 0 THEN
        RAISE EXCEPTION 'ledger movement % does not sum to zero', NEW.ref
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER ledger_balanced AFTER INSERT OR UPDATE ON ledger
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_balanced();

CREATE TABLE guesses (
    id           text PRIMARY KEY,          -- the JOB branded id: job key and idempotency key
    round_id     text NOT NULL REFERENCES rounds (id),
    player_id    text NOT NULL REFERENCES players (id),
    emojis       text[] NOT NULL,
    charged      bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    admitted_at  timestamptz,               -- set by the relay once the job is on the cm lane
    score        integer,
    scored_at    timestamptz,
    CONSTRAINT guesses_six CHECK (cardinality(emojis) = 6),
    CONSTRAINT guesses_charged_non_negative CHECK (charged >= 0),
    CONSTRAINT guesses_score_range CHECK (score BETWEEN 0 AND 600),
    CONSTRAINT guesses_scored_together CHECK ((score IS NULL) = (scored_at IS NULL))
);
CREATE INDEX guesses_round_player ON guesses (round_id, player_id);
CREATE INDEX guesses_unadmitted ON guesses (id) WHERE admitted_at IS NULL;

CREATE TABLE locks (
    round_id   text NOT NULL REFERENCES rounds (id),
    player_id  text NOT NULL REFERENCES players (id),
    position   smallint NOT NULL,
    emoji      text NOT NULL,
    PRIMARY KEY (round_id, player_id, position),
    CONSTRAINT locks_position CHECK (position BETWEEN 0 AND 5)
);

CREATE TABLE payouts (
    round_id    text NOT NULL REFERENCES rounds (id),
    player_id   text NOT NULL REFERENCES players (id),
    amount      bigint NOT NULL,
    guess_id    text REFERENCES guesses (id),
    ref         text NOT NULL UNIQUE REFERENCES movements (ref),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (round_id, player_id),
    CONSTRAINT payouts_amount_positive CHECK (amount > 0)
);
