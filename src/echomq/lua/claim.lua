#!lua flags=allow-oom
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
-- ARGV[1] lease_ms: lease length in milliseconds, 1..86400000
-- ARGV[2] count: most jobs to lease, 0..10000
-- ARGV[3..] ids: the candidate ids
-- RETURNS: flat array, 5 per leased job: id, attempt, payload, lane ('' for none), deadline
-- ERRORS: EMQARG a malformed argument; EMQKEYS job keys not the ids' or not this queue's;
--   EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
local bad = shape({'pending', 'active', 'lanes', 'meta', 'inflight'}, 2, 5, 2)
if bad then return bad end
local lease = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
if not lease or lease < 1 or lease > 86400000 or lease ~= math.floor(lease) then
  return redis.error_reply('EMQARG lease_ms must be an integer in 1..86400000')
end
if not count or count < 0 or count > 10000 or count ~= math.floor(count) then
  return redis.error_reply('EMQARG count must be an integer in 0..10000')
end
local refused = fence(KEYS[4])
if refused then return refused end
local now = now_ms()
local deadline = now + lease
local out = {}
local leased = 0
local vtime -- read only when a laned job is leased (unlaned jobs score 0 and never move it)
local top = 0
local active = {} -- ZADD arguments, sent in one call per 256 leases
for i = 1, #ARGV - 2 do
  if leased >= count then break end
  local id, job = ARGV[i + 2], KEYS[i + 5]
  local row = redis.call('HMGET', job, 'state', 'lane', 'serial', 'payload', 'attempts')
  local lane, serial = row[2], row[3]
  if not row[1] then
    redis.call('ZREM', KEYS[1], id) -- a pending entry without a row cannot run; drop it
  elseif not (serial == '1' and (redis.call('HGET', KEYS[5], lane) or id) ~= id) then
    -- ZSCORE only for a laned job (its tag); otherwise ZREM's reply says it was pending.
    local score = lane and redis.call('ZSCORE', KEYS[1], id)
    if (score or not lane) and redis.call('ZREM', KEYS[1], id) == 1 then
      local attempt = tonumber(row[5] or '0') + 1
      redis.call('HSET', job, 'state', 'active', 'attempts', attempt)
      active[#active + 1] = deadline
      active[#active + 1] = id
      if #active >= 512 then
        redis.call('ZADD', KEYS[2], unpack(active))
        active = {}
      end
      if lane then
        if serial == '1' then redis.call('HSET', KEYS[5], lane, id) end
        if redis.call('HGET', KEYS[3], lane) == score then redis.call('HDEL', KEYS[3], lane) end
        vtime = vtime or tonumber(redis.call('HGET', KEYS[4], 'vtime') or '0')
        score = tonumber(score)
        if score > top then top = score end
      end
      leased = leased + 1
      out[#out + 1] = id
      out[#out + 1] = attempt
      out[#out + 1] = row[4]
      out[#out + 1] = lane or ''
      out[#out + 1] = fmt(deadline)
    end
  end
end
if #active > 0 then redis.call('ZADD', KEYS[2], unpack(active)) end
if vtime and top > vtime then redis.call('HSET', KEYS[4], 'vtime', fmt(top)) end
return out
