#!lua
-- name: schedule
-- summary: Admit a schedule's due ticks, each at most once ever: a tick is admitted only
--   if it is later than the schedule's mark (the last tick admitted) and not later than the
--   server's now; the mark then moves to it. Each tick's job id encodes the tick (its time
--   part) and derives from the schedule's name, so the duplicate refusal backs the mark up.
--   With no ids it only reads (and, the first time, sets the mark to the floor). Every
--   argument, the shape of KEYS and the version fence are checked before the first write.
-- KEYS[1] sched: emq:{q}:sched:<name>, hash: last (the mark, server ms), spec
-- KEYS[2] pending: emq:{q}:pending, sorted set of ready jobs
-- KEYS[3] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[4] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[5] wake: emq:{q}:wake, shard channel
-- KEYS[6..] jobs: emq:{q}:job:<id>, one per id, in the same order
-- ARGV[1] name: the schedule's name ([A-Za-z0-9_.-], 1..100 characters)
-- ARGV[2] floor: the mark to start from if the schedule has none (server ms), '' for none
-- ARGV[3] payload: every tick's job payload
-- ARGV[4] lane: lane name, '' for none
-- ARGV[5] max_attempts: the jobs' failure limit (1..10000), '' for the consumer's default
-- ARGV[6] spec: the schedule's description, kept for inspection
-- ARGV[7] timeout_ms: the jobs' handler timeout (1..31622400000), '' for the consumer's
-- ARGV[8] priority: the jobs' priority, 0..3 (include/pend.lua)
-- ARGV[9..] ids: the ticks' job ids, ticks strictly increasing
-- RETURNS: {mark or -1, the server's now (ms), the ids admitted by this call...}
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not these ids' queue; EMQVERSION
--   another major version; nothing written
-- @include now
-- @include age
-- @include pend
-- @include fence
-- @include shape
local bad = shape({'sched:' .. (ARGV[1] or ''), 'pending', 'lanes', 'meta', 'wake'}, 8, 5, 8)
if bad then return bad end
if #ARGV[1] < 1 or #ARGV[1] > 100 or string.find(ARGV[1], '[^%w_.%-]') then
  return redis.error_reply('EMQARG a schedule name is 1..100 of [A-Za-z0-9_.-]')
end
if #ARGV[4] > 256 then return redis.error_reply('EMQARG lane longer than 256') end
-- argument, lowest, highest, may be '': floor, max_attempts, timeout_ms, priority
for _, c in ipairs({{2, 'floor', 0, 281474976710655, 1}, {5, 'max_attempts', 1, 10000, 1},
                    {7, 'timeout_ms', 1, 31622400000, 1}, {8, 'priority', 0, 3}}) do
  local v, n = ARGV[c[1]], tonumber(ARGV[c[1]])
  if not (c[5] and v == '') and not (n and n >= c[3] and n <= c[4] and n == math.floor(n)) then
    return redis.error_reply('EMQARG ' .. c[2] .. ' must be an integer in ' .. c[3] .. '..' .. fmt(c[4]))
  end
end
local floor = tonumber(ARGV[2])
local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local ticks, last = {}, -1
for i = 9, #ARGV do
  local id = ARGV[i]
  if #id ~= 29 or string.sub(id, 1, 3) ~= 'JOB' or string.find(id, '[^0-9A-HJKMNP-TV-Z]', 4)
      or string.find(id, '^[0-7]', 4) == nil then
    return redis.error_reply('EMQARG ids must be branded JOB ids')
  end
  local tick = 0 -- the id's time part: the first ten characters of its tail
  for j = 4, 13 do tick = tick * 32 + string.find(B32, string.sub(id, j, j), 1, true) - 1 end
  if tick <= last then return redis.error_reply('EMQARG ticks must strictly increase') end
  ticks[#ticks + 1], last = tick, tick
end
local refused, known = fence(KEYS[4])
if refused then return refused end
local now = now_ms()
local mark = tonumber(redis.call('HGET', KEYS[1], 'last') or '')
if not mark and floor and floor <= now then
  mark = floor
  redis.call('HSET', KEYS[1], 'last', fmt(mark), 'spec', ARGV[6])
end
local out = {mark or -1, now}
for i, tick in ipairs(ticks) do
  if tick > now then break end -- threshold: due on the server's clock
  if not mark or tick > mark then -- fence: after the schedule's mark
    local id = ARGV[8 + i]
    if redis.call('EXISTS', KEYS[5 + i]) == 0 then
      if not known then redis.call('HSET', KEYS[4], 'protocol', PROTOCOL); known = true end
      redis.call('HSET', KEYS[5 + i], 'state', 'pending', 'attempts', '0', 'payload', ARGV[3])
      if ARGV[4] ~= '' then redis.call('HSET', KEYS[5 + i], 'lane', ARGV[4], 'serial', '0') end
      if ARGV[5] ~= '' then redis.call('HSET', KEYS[5 + i], 'max', ARGV[5]) end
      if ARGV[7] ~= '' then redis.call('HSET', KEYS[5 + i], 'timeout', ARGV[7]) end
      if ARGV[8] ~= '0' then redis.call('HSET', KEYS[5 + i], 'prio', ARGV[8]) end
      if ARGV[4] ~= '' or ARGV[7] ~= '' or ARGV[8] ~= '0' then -- fence: the claim reads its options
        redis.call('HDEL', KEYS[4], 'plain')
      end
      pend(KEYS[2], KEYS[3], KEYS[4], KEYS[5], id, ARGV[4], false, KEYS[5 + i])
      out[#out + 1] = id
    end
    mark = tick
    redis.call('HSET', KEYS[1], 'last', fmt(mark), 'spec', ARGV[6])
  end
end
out[1] = mark or -1
return out
