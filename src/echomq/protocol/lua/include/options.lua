-- admit_args() / admit_row(...): admit.lua's options, shared by the admissions that take
-- them (admit, throttle, debounce). ARGV[3..9] are lane, delay_ms, serial, max_attempts,
-- priority, timeout_ms and token, as in admit.lua's contract.
-- admit_args() checks them (reads no key) and returns the EMQARG error reply, else nil and
-- the delay (ms).
-- admit_row(job, pending, delayed, lanes, meta, wake, id, delay, known) writes the row of
-- a new job (its payload ARGV[2]) with those options and puts it on pending (pend) or delayed (due now +
-- delay, server ms); records the protocol version on a queue that has none (known false),
-- with meta 'plain' when this job has no lane, priority or timeout (a job with one clears
-- it) and meta 'bare' (no row has a parent or a cancel request: decision 0050).
-- @include now
-- @include fence
-- @include pend
local function admit_args()
  local delay = tonumber(ARGV[4])
  if not delay or delay < 0 or delay > 31622400000 or delay ~= math.floor(delay) then
    return redis.error_reply('EMQARG delay_ms must be an integer in 0..31622400000')
  end
  if ARGV[5] ~= '0' and ARGV[5] ~= '1' then
    return redis.error_reply('EMQARG serial must be 0 or 1')
  end
  if #ARGV[3] > 1024 then -- a lane is 1..256 characters (echomq.core.bounds.MAX_LANE): 1 KiB
    return redis.error_reply('EMQARG lane must be at most 256 characters')
  end
  local max = tonumber(ARGV[6])
  if ARGV[6] ~= '' and (not max or max < 1 or max > 10000 or max ~= math.floor(max)) then
    return redis.error_reply('EMQARG max_attempts must be an integer in 1..10000')
  end
  local prio = tonumber(ARGV[7])
  if not prio or prio < 0 or prio > 3 or prio ~= math.floor(prio) then
    return redis.error_reply('EMQARG priority must be an integer in 0..3')
  end
  local timeout = tonumber(ARGV[8])
  if ARGV[8] ~= '' and (not timeout or timeout < 1 or timeout > 31622400000
      or timeout ~= math.floor(timeout)) then
    return redis.error_reply('EMQARG timeout_ms must be an integer in 1..31622400000')
  end
  if #ARGV[9] > 32 then return redis.error_reply('EMQARG token must be at most 32 bytes') end
  return nil, delay
end
local function admit_row(job, pending, delayed, lanes, meta, wake, id, delay, known)
  local plain = ARGV[3] == '' and tonumber(ARGV[7]) == 0 and ARGV[8] == ''
  if not known then redis.call('HSET', meta, 'protocol', PROTOCOL, 'bare', '1') end -- no parent or cancel yet
  if not plain then redis.call('HDEL', meta, 'plain') -- fence: the claim reads this job's options
  elseif not known then redis.call('HSET', meta, 'plain', '1') end -- a new queue, plain so far
  redis.call('HSET', job, 'state', 'pending', 'attempts', '0', 'payload', ARGV[2], 'tok', ARGV[9])
  if ARGV[3] ~= '' then redis.call('HSET', job, 'lane', ARGV[3], 'serial', ARGV[5]) end
  if ARGV[6] ~= '' then redis.call('HSET', job, 'max', ARGV[6]) end
  if tonumber(ARGV[7]) > 0 then redis.call('HSET', job, 'prio', ARGV[7]) end
  if ARGV[8] ~= '' then redis.call('HSET', job, 'timeout', ARGV[8]) end
  if delay > 0 then
    redis.call('HSET', job, 'state', 'delayed')
    redis.call('ZADD', delayed, now_ms() + delay, id)
  else
    pend(pending, lanes, meta, wake, id, ARGV[3], false, job)
  end
end
