#!lua
-- name: claim
-- summary: Lease up to ARGV[2] of the candidate jobs (peeked from pending by the client)
--   for lease_ms on the server clock. Each leased job's attempts is incremented: it is the
--   fencing token every later transition of that attempt must present. A candidate that
--   is no longer pending, or whose serial lane has another job in flight, is skipped.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] active: emq:{q}:active, sorted set, score = lease deadline (server ms)
-- KEYS[3] lanes: emq:{q}:lanes
-- KEYS[4] meta: emq:{q}:meta
-- KEYS[5] inflight: emq:{q}:inflight, hash, serial lane -> the job holding it
-- KEYS[6..] jobs: emq:{q}:job:<id> for each candidate, in ARGV[3..] order
-- ARGV[1] lease_ms: lease length in milliseconds
-- ARGV[2] count: most jobs to lease
-- ARGV[3..] ids: the candidate ids
-- RETURNS: flat array, 5 per leased job: id, attempt, payload, lane ('' for none), deadline
-- ERRORS: EMQARG a malformed argument; nothing written
-- @include now
local lease = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
if not lease or lease <= 0 or not count or count < 0 then
  return redis.error_reply('EMQARG lease_ms and count must be positive numbers')
end
local now = now_ms()
local deadline = now + lease
local out = {}
local leased = 0
local vtime = tonumber(redis.call('HGET', KEYS[4], 'vtime') or '0')
local top = vtime
for i = 1, #ARGV - 2 do
  if leased >= count then break end
  local id, job = ARGV[i + 2], KEYS[i + 5]
  local score = redis.call('ZSCORE', KEYS[1], id)
  if score then
    local row = redis.call('HMGET', job, 'state', 'lane', 'serial', 'payload')
    local lane, serial = row[2], row[3]
    local busy = false
    if serial == '1' then
      local holder = redis.call('HGET', KEYS[5], lane)
      busy = holder and holder ~= id
    end
    if not row[1] then
      redis.call('ZREM', KEYS[1], id) -- a pending entry without a row cannot run; drop it
    elseif not busy then
      redis.call('ZREM', KEYS[1], id)
      local attempt = redis.call('HINCRBY', job, 'attempts', 1)
      redis.call('HSET', job, 'state', 'active')
      redis.call('ZADD', KEYS[2], deadline, id)
      if lane then
        if serial == '1' then redis.call('HSET', KEYS[5], lane, id) end
        if redis.call('HGET', KEYS[3], lane) == score then redis.call('HDEL', KEYS[3], lane) end
      end
      score = tonumber(score)
      if score > top then top = score end
      leased = leased + 1
      out[#out + 1] = id
      out[#out + 1] = attempt
      out[#out + 1] = row[4]
      out[#out + 1] = lane or ''
      out[#out + 1] = fmt(deadline)
    end
  end
end
if top > vtime then redis.call('HSET', KEYS[4], 'vtime', fmt(top)) end
return out
