-- The claim gate (docs/decisions/0022-claim-gate.md): pause and rate limits, checked by
-- every script that leases a job, so no door bypasses them. Limits live in meta (set by
-- the limits script), on the server clock. Each limit is a sliding window: no window of
-- <ms> holds more than <max> leases. The queue's log is a list of lease times, newest
-- first, trimmed to max; a lane's log is its last lane_max lease times in lane_rate,
-- indexed by its newest time in lane_seen (stale lanes are pruned there). A held-back job
-- is not leased: it stays pending and no attempt is counted.
-- gate_open(meta, rate, lane_rate, lane_seen, now) -> g, one HMGET of meta; no write. A
--   caller that may take more than one lease sets g.want to how many (the log's read slice).
--   g.plain: the queue's meta says no row of it has a lane, priority or timeout (meta
--   'plain', docs/protocol.md "What each feature costs"), so the claim reads none of those fields.
-- gate_take(g, lane) -> true when one more lease fits (counted in g), else false with
--   g.wait lowered to the ms until the first held token is due.
-- gate_close(g): record the leases taken in the logs (the gate's only writes).
-- @include now
local function gate_open(meta, rate, lane_rate, lane_seen, now)
  local m = redis.call('HMGET', meta, 'paused', 'rate_max', 'rate_ms', 'lane_max', 'lane_ms', 'plain')
  local plain = m[6] == '1'
  if m[1] ~= '1' and not m[2] and not m[4] then return {on = false, used = 0, plain = plain} end -- no gate
  return {on = true, now = now, plain = plain, paused = m[1] == '1', qmax = tonumber(m[2]), qms = tonumber(m[3]),
          lmax = tonumber(m[4]), lms = tonumber(m[5]), used = 0, logs = {}, wait = nil,
          rate = rate, lane_rate = lane_rate, lane_seen = lane_seen}
end
-- gate_log(g, back): the queue log's entry at index back (a number, or nil past its end),
-- read in one LRANGE per slice of the leases the call may still take (g.want, default 1:
-- a hand-off's one), not one LINDEX per lease; the log is written only by gate_close.
local function gate_log(g, back)
  if not g.qlog or back < g.qlo then
    g.qlo = math.max(0, back - math.min(math.max((g.want or 1) - g.used, 1), 512) + 1)
    g.qlog = redis.call('LRANGE', g.rate, g.qlo, back)
  end
  return tonumber(g.qlog[back - g.qlo + 1])
end
local function gate_hold(g, due)
  if not g.wait or due - g.now < g.wait then g.wait = due - g.now end
  return false
end
local function gate_take(g, lane)
  if g.paused then return false end -- threshold: a paused queue leases nothing
  if g.qfull then return gate_hold(g, g.qfull) end
  if g.qmax then
    -- the max-th lease back from this one must be older than the window
    local back = g.qmax - g.used - 1
    local t = g.now
    if back >= 0 then t = gate_log(g, back) end
    if t and t + g.qms > g.now then -- threshold: the queue's rate limit
      g.qfull = t + g.qms
      return gate_hold(g, g.qfull)
    end
  end
  if g.lmax and lane then
    local log = g.logs[lane]
    if not log then
      log = {}
      for t in string.gmatch(redis.call('HGET', g.lane_rate, lane) or '', '%d+') do
        log[#log + 1] = tonumber(t)
      end
      g.logs[lane] = log
    end
    local t = log[#log - g.lmax + 1]
    if t and t + g.lms > g.now then -- threshold: the lane's rate limit
      return gate_hold(g, t + g.lms)
    end
    log[#log + 1] = g.now
    log.took = true
  end
  g.used = g.used + 1
  return true
end
local function gate_close(g)
  if g.used == 0 then return end
  local now = g.now
  if g.qmax then
    local k, times = math.min(g.used, g.qmax), {} -- one LPUSH per 512 lease times
    for i = 1, math.min(k, 512) do times[i] = now end
    for s = 1, k, 512 do redis.call('LPUSH', g.rate, unpack(times, 1, math.min(512, k - s + 1))) end
    redis.call('LTRIM', g.rate, 0, g.qmax - 1)
    redis.call('PEXPIRE', g.rate, g.qms)
  end
  if not g.lmax then return end
  local seen = false
  for lane, log in pairs(g.logs) do
    if log.took then
      local keep = {}
      for i = math.max(1, #log - g.lmax + 1), #log do
        if log[i] + g.lms > now then keep[#keep + 1] = fmt(log[i]) end
      end
      redis.call('HSET', g.lane_rate, lane, table.concat(keep, ' '))
      redis.call('ZADD', g.lane_seen, now, lane)
      seen = true
    end
  end
  if not seen then return end
  -- prune up to 16 lanes whose newest lease left the window: the hash stays bounded
  local stale = redis.call('ZRANGEBYSCORE', g.lane_seen, '-inf', now - g.lms, 'LIMIT', 0, 16)
  for _, lane in ipairs(stale) do
    redis.call('HDEL', g.lane_rate, lane)
    redis.call('ZREM', g.lane_seen, lane)
  end
  redis.call('PEXPIRE', g.lane_rate, g.lms)
  redis.call('PEXPIRE', g.lane_seen, g.lms)
end
