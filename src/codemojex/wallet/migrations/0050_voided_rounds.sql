-- 0050: rounds voided by an operator. A void refunds every charge of an unsettled round
-- by compensating movements (one per player, kind 'payout', ref 'void:<round>:<player>',
-- from the round's pot back to the player) and settles the round: nothing is edited, the
-- books stay balanced, and this row says why the round's payouts are refunds.
CREATE TABLE voided_rounds (
    round_id    text PRIMARY KEY REFERENCES rounds (id),
    reason      text NOT NULL DEFAULT '',
    refunded    bigint NOT NULL,
    voided_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT voided_refunded_non_negative CHECK (refunded >= 0)
);
