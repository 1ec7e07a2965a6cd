#!lua flags=allow-oom
-- name: complete_batch
-- summary: Finish several attempts in one call, each exactly as `complete` does: fenced by
--   (id, attempt) and by its live lease on the server clock, the lease cleared in the same
--   step, the row kept for keep_ms in the done set without its payload (or deleted when
--   keep_ms is 0), or ended 'cancelled' when a cancel was asked for. One verdict per
--   attempt; a stale attempt changes nothing. Every check precedes the first write, the set
--   updates go out in slices of 256 (no unbounded unpack), the finished channel is told once.
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] done: emq:{q}:done, sorted set, score = finish time (server ms)
-- KEYS[3] inflight: emq:{q}:inflight
-- KEYS[4] meta: emq:{q}:meta
-- KEYS[5] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- KEYS[6..] jobs: emq:{q}:job:<id> for each attempt, in the order of the id/attempt pairs
-- ARGV[1] keep_ms: retention of the finished rows, 0..31622400000; 0 deletes them now
-- ARGV[2..] attempts: id, attempt and result ('' for none) of each attempt, flat
-- RETURNS: array, one per attempt in order: 1 completed | 2 cancelled | 0 stale
-- ERRORS: EMQARG a malformed argument; EMQKEYS job keys not the ids' or not this queue's;
--   EMQVERSION another major version; nothing written
-- @include now
-- @include release
-- @include ended
-- @include fence
-- @include shape
local bad = shape({'active', 'done', 'inflight', 'meta', 'finished'}, 1, 5, nil) -- jobs below
local n = #KEYS - 5
if bad or #ARGV ~= 1 + 3 * n then
  return bad or redis.error_reply('EMQKEYS one job key per id, attempt, result triple expected')
end
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'active') .. 'job:'
for i = 1, n do
  if KEYS[i + 5] ~= prefix .. ARGV[3 * i - 1] then
    return redis.error_reply('EMQKEYS KEYS[' .. (i + 5) .. '] is not the job of its id')
  end
end
local keep = tonumber(ARGV[1])
if not keep or keep < 0 or keep > 31622400000 or keep ~= math.floor(keep) then
  return redis.error_reply('EMQARG keep_ms must be an integer in 0..31622400000')
end
local refused = fence(KEYS[4])
if refused then return refused end
local now = now_ms()
local deadlines = {} -- every lease deadline, one ZMSCORE per slice of 256 (not a ZSCORE per job)
for s = 1, n, 256 do
  local ids = {}
  for i = s, math.min(s + 255, n) do ids[#ids + 1] = ARGV[3 * i - 1] end
  for j, d in ipairs(redis.call('ZMSCORE', KEYS[1], unpack(ids))) do deadlines[s + j - 1] = d end
end
local out, won, seen = {}, {}, {}
for i = 1, n do -- reads only: which attempts hold a live lease
  local id, attempt = ARGV[3 * i - 1], ARGV[3 * i]
  local row = redis.call('HMGET', KEYS[i + 5], 'state', 'attempts', 'lane', 'cancel')
  local deadline = deadlines[i]
  local live = row[1] == 'active' and deadline ~= false and not seen[id] -- running, once
  live = live and row[2] == attempt -- fence: this attempt holds it
  live = live and tonumber(deadline) >= now -- fence: the lease deadline has not passed
  out[i] = live and (row[4] and 2 or 1) or 0 -- fence: a cancel was asked: cancelled, not done
  if live then won[#won + 1], seen[id] = {i, row[3]}, true end
end
for s = 1, #won, 256 do -- writes, in slices: ZREM/ZADD take at most 256 members each
  local gone, done = {}, {}
  for w = s, math.min(s + 255, #won) do
    local i, lane = won[w][1], won[w][2]
    local job, id, result = KEYS[i + 5], ARGV[3 * i - 1], ARGV[3 * i + 1]
    gone[#gone + 1] = id
    release(KEYS[3], lane, id)
    if out[i] == 2 then
      ended(job, KEYS[2], id, now)
    elseif keep == 0 then
      redis.call('DEL', job)
    else
      redis.call('HDEL', job, 'payload')
      redis.call('HSET', job, 'state', 'done', unpack(result ~= '' and {'result', result} or {}))
      done[#done + 1] = now
      done[#done + 1] = id
    end
  end
  redis.call('ZREM', KEYS[1], unpack(gone))
  if #done > 0 then redis.call('ZADD', KEYS[2], unpack(done)) end
  redis.call('SPUBLISH', KEYS[5], table.concat(gone, ' '))
end
return out
