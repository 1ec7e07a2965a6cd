#!lua flags=no-writes
-- name: rows_exist
-- summary: Which of these jobs have a row in this shard: the admission of a sharded queue
--   asks the shards of the layout an online reshard is emptying, so an id admitted there
--   stays one job (docs/decisions/0032-online-reshard.md). A reservation (decision 0040)
--   is no job's row: the job it announced is a row of its own shard, or was never admitted.
--   No version fence: the shards asked are retired.
-- KEYS[1] meta: emq:{q}:meta
-- KEYS[2..] jobs: emq:{q}:job:<id> for each id, in ARGV order
-- ARGV[1..] ids: the job ids
-- RETURNS: array, one per id in order: 1 a job's row exists | 0 none (or a reservation)
-- ERRORS: EMQKEYS job keys not the ids' or not this queue's
-- @include shape
local bad = shape({'meta'}, 0, 1, 0)
if bad then return bad end
local out = {}
for i = 2, #KEYS do
  local state = redis.call('HGET', KEYS[i], 'state')
  out[i - 1] = (state and state ~= 'reserved') and 1 or 0
end
return out
