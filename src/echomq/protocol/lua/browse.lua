#!lua flags=no-writes
-- name: browse
-- summary: Read the rows of candidate jobs (peeked by the client from one state's set) that
--   are still in that set, as one consistent snapshot.
-- KEYS[1] set: emq:{q}:<pending|active|delayed|done|dead>
-- KEYS[2] meta: emq:{q}:meta
-- KEYS[3..] jobs: emq:{q}:job:<id> for each candidate, in ARGV order
-- ARGV[1..] ids: the candidate ids
-- RETURNS: flat array, 3 per job still in the set: id, score, the row as a flat field/value array
-- ERRORS: EMQKEYS job keys not the ids' or not this queue's; EMQVERSION another major version
-- @include fence
-- @include shape
local bad = shape({false, 'meta'}, 0, 2, 0)
if bad then return bad end
local refused = fence(KEYS[2])
if refused then return refused end
local out = {}
for i = 1, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = score
    out[#out + 1] = redis.call('HGETALL', KEYS[i + 2])
  end
end
return out
