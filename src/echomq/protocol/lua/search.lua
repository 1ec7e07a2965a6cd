#!lua flags=no-writes
-- name: search
-- summary: One bounded window of a search (docs/decisions/0037-search.md): the entries of one
--   state's set that follow a cursor, in set order (score, then id), at most count of them,
--   and of those the ids inside an id range. The cursor is the last entry a window examined;
--   if it has left the set since, the window starts where it would stand (a binary search
--   among the entries of its score, about log2 of their number in single-rank reads). Work:
--   O(log n + count) whatever the set's size. Reads no row.
-- KEYS[1] set: emq:{q}:<pending|active|delayed|done|dead>
-- KEYS[2] meta: emq:{q}:meta
-- ARGV[1] after_score: the cursor's score, as the server wrote it ('' with no cursor)
-- ARGV[2] after_id: the cursor's id, '' to start at the first entry
-- ARGV[3] count: entries to examine, 1..500
-- ARGV[4] low: the least id to return, '' for no bound
-- ARGV[5] high: the greatest id to return, '' for no bound
-- RETURNS: flat array: examined (the window's entry count; below count: the set is done),
--   the last examined entry's score and id ('' '' when none), then id, score of each entry
--   of the window inside [low, high]
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version
-- @include fence
-- @include shape
local bad = shape({false, 'meta'}, 5)
if bad then return bad end
local count = tonumber(ARGV[3])
if not count or count < 1 or count > 500 or count ~= math.floor(count) then
  return redis.error_reply('EMQARG count must be an integer in 1..500')
end
local after = tonumber(ARGV[1])
if ARGV[2] ~= '' and not after then
  return redis.error_reply('EMQARG after_score must be a number with a cursor id')
end
local refused = fence(KEYS[2])
if refused then return refused end
local set, id, start = KEYS[1], ARGV[2], 0
if id ~= '' then
  local score = redis.call('ZSCORE', set, id)
  if score and tonumber(score) == after then
    start = redis.call('ZRANK', set, id) + 1
  else -- gone: the first entry after (after, id); ties of a score are in id order
    local lo = redis.call('ZCOUNT', set, '-inf', '(' .. ARGV[1])
    local hi = redis.call('ZCOUNT', set, '-inf', ARGV[1])
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if redis.call('ZRANGE', set, mid, mid)[1] <= id then lo = mid + 1 else hi = mid end
    end
    start = lo
  end
end
local got = redis.call('ZRANGE', set, start, start + count - 1, 'WITHSCORES')
local n = #got / 2
local out = {n, got[#got] or '', got[#got - 1] or ''}
local low, high = ARGV[4], ARGV[5]
for i = 1, #got, 2 do
  if (low == '' or got[i] >= low) and (high == '' or got[i] <= high) then
    out[#out + 1] = got[i]
    out[#out + 1] = got[i + 1]
  end
end
return out
