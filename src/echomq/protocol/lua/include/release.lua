-- release(inflight, lane, id): free a serial lane for its next job, if this job holds it.
local function release(inflight, lane, id)
  if lane and redis.call('HGET', inflight, lane) == id then
    redis.call('HDEL', inflight, lane)
  end
end
