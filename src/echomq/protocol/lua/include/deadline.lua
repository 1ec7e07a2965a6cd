-- deadline_arg(arg, delay) / set_deadline(job, expiring, id, expires): an admission's
-- deadline to start by (docs/decisions/0045-expiry.md). deadline_arg checks the expires_ms
-- argument ('' for none; 1..31622400000 and more than delay ms: a job delayed past its own
-- deadline could never start) and returns the EMQARG error reply, else nil and the number
-- (nil for none); reads no key. set_deadline writes the deadline (server ms) into the row as
-- 'exp' and puts the id on the expiring index at it: claim and the expiry reaper read them.
-- @include now
local function deadline_arg(arg, delay)
  if arg == '' then return nil, nil end
  local expires = tonumber(arg)
  if not expires or expires <= delay or expires > 31622400000 or expires ~= math.floor(expires) then
    return redis.error_reply('EMQARG expires_ms must be an integer in 1..31622400000, more than delay_ms')
  end
  return nil, expires
end
local function set_deadline(job, expiring, id, expires)
  local at = now_ms() + expires
  redis.call('HSET', job, 'exp', fmt(at))
  redis.call('ZADD', expiring, at, id)
end
