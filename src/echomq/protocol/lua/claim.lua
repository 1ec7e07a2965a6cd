#!lua flags=allow-oom
-- name: claim
-- summary: Lease up to ARGV[2] of the candidate jobs (peeked from pending by the client)
--   for lease_ms on the server clock. Each leased job's attempts is incremented: it is the
--   fencing token every later transition of that attempt must present. A candidate that
--   is no longer pending, or whose serial lane has another job in flight, is skipped; so
--   is one the claim gate holds back (queue paused, queue or lane rate limit): it stays
--   pending and no attempt is counted. A candidate past its deadline (admitted with
--   expires_ms) is never leased: it ends 'expired' in this same step (include/expiry.lua;
--   docs/decisions/0045-expiry.md), so no claim can race the expiry reaper.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] active: emq:{q}:active, sorted set, score = lease deadline (server ms)
-- KEYS[3] lanes: emq:{q}:lanes
-- KEYS[4] meta: emq:{q}:meta, hash: vtime, paused and the rate limits
-- KEYS[5] inflight: emq:{q}:inflight, hash, serial lane -> the job holding it
-- KEYS[6] rate: emq:{q}:rate, list, the queue's last lease times (server ms), newest first
-- KEYS[7] lane_rate: emq:{q}:lane_rate, hash, lane -> its last lease times
-- KEYS[8] lane_seen: emq:{q}:lane_seen, sorted set, lane -> its newest lease time
-- KEYS[9] expired: emq:{q}:expired, sorted set, score = when it expired (server ms)
-- KEYS[10] expiring: emq:{q}:expiring, the deadlines of waiting jobs that have one
-- KEYS[11] finished: emq:{q}:finished, shard channel told the ids of jobs that expired
-- KEYS[12..] jobs: emq:{q}:job:<id> for each candidate, in ARGV[3..] order
-- ARGV[1] lease_ms: lease length in milliseconds, 1..86400000
-- ARGV[2] count: most jobs to lease, 0..10000
-- ARGV[3..] ids: the candidate ids
-- RETURNS: flat array: the leases' deadline (server ms, one for all), the fields per
--   lease (3 in a plain queue, else 5), then per leased job: id, attempt, payload, and
--   unless plain lane ('' for none) and timeout (the job's handler timeout in ms, '' for
--   none); then, when the gate held a candidate back, one more element: -1 if the queue
--   is paused, else the milliseconds until the first held-back token is due
-- ERRORS: EMQARG a malformed argument; EMQKEYS job keys not the ids' or not this queue's;
--   EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
-- @include gate
-- @include age
-- @include expiry
local bad = shape({'pending', 'active', 'lanes', 'meta', 'inflight', 'rate', 'lane_rate',
                   'lane_seen', 'expired', 'expiring', 'finished'}, 2, 11, 2)
if bad then return bad end
local lease, count = tonumber(ARGV[1]), tonumber(ARGV[2])
if not lease or lease < 1 or lease > 86400000 or lease ~= math.floor(lease) then
  return redis.error_reply('EMQARG lease_ms must be an integer in 1..86400000')
end
if not count or count < 0 or count > 10000 or count ~= math.floor(count) then
  return redis.error_reply('EMQARG count must be an integer in 0..10000')
end
local refused = fence(KEYS[4])
if refused then return refused end
local call, now = redis.call, now_ms()
local g = gate_open(KEYS[4], KEYS[6], KEYS[7], KEYS[8], now)
if g.on then g.want = count end -- the gate reads its log in slices of this many
local due = fmt(now + lease) -- the deadline, formatted once (a score and a reply field)
-- A plain queue (meta 'plain', docs/decisions/0044) reads no lane, priority or timeout
-- field, unless a job waits on a lane or priority line: an older client's admission of
-- such a job does not clear 'plain', and its line is in lanes while it waits.
local plain = g.plain and call('EXISTS', KEYS[3]) == 0 -- fence: a waiting line reads options
local heal = g.plain and not plain -- such a job found: 'plain' cleared, so its finish reads its lane
local stride = plain and 3 or 5 -- a plain queue's leases have no lane or timeout to send
local out, gone, active, seen, leased, top, vtime, told = {due, stride}, {}, {}, {}, 0, 0, nil, {}
-- Deadlines are read only while some waiting job has one: every such job is on the index
-- (admit, retry, reap, requeue put it there), so a queue that never uses expires_ms pays one
-- EXISTS per call and nothing per job (decision 0045; issue 30).
local timed = call('EXISTS', KEYS[10]) == 1
local function flush() -- the leases so far: off pending, onto active (<= 512 members a call)
  if #gone > 0 then call('ZREM', KEYS[1], unpack(gone)) gone = {} end
  if #active > 0 then -- the last leased first: in a listpack (< 128 leases) each id then
    local add = {}    -- lands before the equal deadlines just added, not after a walk past them
    for x = #active, 1, -1 do add[#add + 1], add[#add + 2] = due, active[x] end
    -- Leases go to a skiplist (decision 0054): a listpack walks every earlier lease, reading
    -- its score, to append each new one. A set that already holds leases converts once this
    -- call adds 16, a new one once it adds 32 (a set a small batch empties each time stays a
    -- listpack). A member longer than zset-max-listpack-value (and than any id) makes ZADD
    -- convert it; it is removed in this step, and the set stays a skiplist until empty.
    local enc = #active >= 16 and (call('OBJECT', 'ENCODING', KEYS[2]) or 'new')
    local wide = (enc == 'listpack' or (enc == 'new' and #active >= 32)) and string.rep('~', 1024)
    if wide then add[#add + 1], add[#add + 2] = 0, wide end
    call('ZADD', KEYS[2], unpack(add))
    if wide then call('ZREM', KEYS[2], wide) end
    active = {}
  end
end
local i, n = 1, #ARGV - 2
while i <= n and leased < count do -- one ZMSCORE per slice: which candidates are pending
  local last = math.min(n, i + math.min(math.max(count - leased, 8), 256) - 1)
  local scores = call('ZMSCORE', KEYS[1], unpack(ARGV, i + 2, last + 2))
  for j = i, last do
    local id, score = ARGV[j + 2], scores[j - i + 1]
    if score and leased < count and not seen[id] then
      seen[id] = true
      local job = KEYS[j + 11]
      local state, lane, serial, payload, tries, prio, timeout, exp
      if plain then -- no lane, serial lane, priority or timeout on any row: those fields are not read
        state, payload, tries, exp = unpack(timed and call('HMGET', job, 'state', 'payload', 'attempts', 'exp')
                                            or call('HMGET', job, 'state', 'payload', 'attempts'))
      else
        state, lane, serial, payload, tries, prio, timeout, exp = unpack(timed
          and call('HMGET', job, 'state', 'lane', 'serial', 'payload', 'attempts', 'prio', 'timeout', 'exp')
          or call('HMGET', job, 'state', 'lane', 'serial', 'payload', 'attempts', 'prio', 'timeout'))
        if heal and (lane or prio or timeout) then -- fence: an older client's options clear 'plain'
          heal = false
          call('HDEL', KEYS[4], 'plain')
        end
      end
      serial, prio = serial == '1', prio and tonumber(prio) or 0
      local line = lane or (prio > 0 and '') or nil -- the tag's line: the lane, '' for priority
      if not state then
        gone[#gone + 1] = id -- a pending entry without a row cannot run; drop it
      elseif exp and tonumber(exp) <= now then -- fence: past its deadline: expired, not leased
        gone[#gone + 1], told[#told + 1] = id, id
        call('ZREM', KEYS[10], id)
        expire(job, KEYS[9], KEYS[5], KEYS[11], id, lane, now)
      elseif not (serial and (call('HGET', KEYS[5], lane) or id) ~= id) and (not g.on or gate_take(g, lane)) then
        local attempt = tonumber(tries or '0') + 1
        call('HSET', job, 'state', 'active', 'attempts', attempt)
        if exp then call('ZREM', KEYS[10], id) end -- started in time: off the expiry index
        gone[#gone + 1], active[#active + 1] = id, id
        if line then
          if serial then call('HSET', KEYS[5], lane, id) end
          local tag = tonumber(score) + prio * AGE
          if tonumber(call('HGET', KEYS[3], line)) == tag then call('HDEL', KEYS[3], line) end
          vtime = vtime or tonumber(call('HGET', KEYS[4], 'vtime') or '0')
          if tag > top then top = tag end
        end
        local o = 2 + leased * stride
        out[o + 1], out[o + 2], out[o + 3] = id, attempt, payload
        if stride == 5 then out[o + 4], out[o + 5] = lane or '', timeout or '' end
        leased = leased + 1
      end
      if #gone >= 512 then flush() end
    end
  end
  i = last + 1
end
flush()
if #told > 0 then call('SPUBLISH', KEYS[11], table.concat(told, ' ')) end
if vtime and top > vtime then call('HSET', KEYS[4], 'vtime', fmt(top)) end
gate_close(g)
if g.paused then out[#out + 1] = -1 elseif g.wait then out[#out + 1] = g.wait end
return out
