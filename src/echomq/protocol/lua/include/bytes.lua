-- The bound of every client byte a draining (allow-oom) script keeps (echomq.bounds; a test
-- checks they agree, docs/protocol.md "Bounds"). Each is checked before the first write.
local MAX_RESULT = 524288 -- one job's result (complete, complete_batch)
local MAX_RESULTS = 4194304 -- the results of one complete_batch call together
local MAX_ERROR = 65536 -- one failed attempt's error text (retry)
local MAX_PROGRESS = 65536 -- one progress report (progress, deny-oom)
local MAX_NAME = 256 -- a worker's name (worker_beat)
local MAX_ABOUT = 8192 -- a worker's description (worker_beat)
local MAX_TTL_MS = 86400000 -- a worker's registration without a beat (worker_beat)
local ROOM = 1024 -- client bytes a call may add while the server is past its maxmemory
-- too_long(what, size, max): the EMQARG reply when size (bytes) is over max, else nil.
local function too_long(what, size, max)
  if size <= max then return nil end
  return redis.error_reply('EMQARG ' .. what .. ' must be at most ' .. max .. ' bytes, not ' .. size)
end
-- full(adds): the OOM reply when a call would keep adds > ROOM client bytes on a server past
-- its maxmemory under noeviction (read from INFO only then: a small call never pays), else nil.
local function full(adds)
  if adds <= ROOM then return nil end -- the room a call always has
  local info = redis.call('INFO', 'memory')
  local used = tonumber(string.match(info, 'used_memory:(%d+)'))
  local limit = tonumber(string.match(info, 'maxmemory:(%d+)')) or 0
  if limit == 0 or used < limit or not string.find(info, 'maxmemory_policy:noeviction', 1, true) then
    return nil
  end
  return redis.error_reply("OOM command not allowed when used memory > 'maxmemory' (" .. adds
                           .. ' client bytes to keep); nothing was written')
end
