-- step_row(job, delay): a flow step's options (ARGV[3..8], in admit's places and checked
-- by admit_args, include/options.lua) written into its row as admit_row writes them: 'lane'
-- and 'serial', 'max', 'prio', 'timeout'; and its delay as 'delay' (ms), applied when the
-- step becomes runnable: a held child at its start (flow_start), a waiting parent at its
-- release (include/flows.lua). Writes nothing for a step without options (decision 0041).
-- A step with a lane, priority or timeout clears the queue's meta 'plain' (decision 0044).
-- @include now
local function step_row(job, delay, meta)
  if ARGV[3] ~= '' or tonumber(ARGV[7]) > 0 or ARGV[8] ~= '' then -- fence: the claim reads them
    redis.call('HDEL', meta, 'plain')
  end
  if ARGV[3] ~= '' then redis.call('HSET', job, 'lane', ARGV[3], 'serial', ARGV[5]) end
  if ARGV[6] ~= '' then redis.call('HSET', job, 'max', ARGV[6]) end
  if tonumber(ARGV[7]) > 0 then redis.call('HSET', job, 'prio', ARGV[7]) end
  if ARGV[8] ~= '' then redis.call('HSET', job, 'timeout', ARGV[8]) end
  if delay > 0 then redis.call('HSET', job, 'delay', fmt(delay)) end
end
