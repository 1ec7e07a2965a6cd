#!lua flags=allow-oom
-- name: complete_batch
-- summary: Finish several attempts in one call, each exactly as `complete` does: fenced by
--   (id, attempt) and by its live lease on the server clock, the lease cleared in the same
--   step, the row kept for keep_ms in the done set without its payload (or deleted when
--   keep_ms is 0). One
--   verdict per attempt; a stale attempt changes nothing. Bounded by the caller's batch.
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] done: emq:{q}:done, sorted set, score = finish time (server ms)
-- KEYS[3] inflight: emq:{q}:inflight
-- KEYS[4..] jobs: emq:{q}:job:<id> for each attempt, in the order of the id/attempt pairs
-- ARGV[1] keep_ms: retention of the finished rows, 0 to delete them now
-- ARGV[2..] attempts: id, attempt and result ('' for none) of each attempt, flat
-- RETURNS: array, one per attempt in order: 1 completed | 0 stale
-- ERRORS: EMQARG a malformed argument; nothing written
-- @include now
-- @include release
local keep = tonumber(ARGV[1])
local n = #KEYS - 3
if not keep or keep < 0 or #ARGV ~= 1 + 3 * n then
  return redis.error_reply('EMQARG keep_ms must be >= 0, with id, attempt, result per job key')
end
local now = now_ms()
local out, gone, done = {}, {}, {}
for i = 1, n do
  local job, id, attempt, result = KEYS[i + 3], ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local row = redis.call('HMGET', job, 'state', 'attempts', 'lane')
  local deadline = redis.call('ZSCORE', KEYS[1], id)
  if row[1] ~= 'active' or row[2] ~= attempt or not deadline or tonumber(deadline) < now then
    out[i] = 0
  else
    out[i] = 1
    gone[#gone + 1] = id
    release(KEYS[3], row[3], id)
    if keep == 0 then
      redis.call('DEL', job)
    else
      redis.call('HDEL', job, 'payload')
      if result ~= '' then
        redis.call('HSET', job, 'state', 'done', 'result', result)
      else
        redis.call('HSET', job, 'state', 'done')
      end
      done[#done + 1] = now
      done[#done + 1] = id
    end
  end
end
-- One ZREM and one ZADD for the batch (the caller bounds it; unpack takes thousands).
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
if #done > 0 then redis.call('ZADD', KEYS[2], unpack(done)) end
return out
