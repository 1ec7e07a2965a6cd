-- release(inflight, job, id): free the job's lane for its next job, if this job holds it.
local function release(inflight, job, id)
  local lane = redis.call('HGET', job, 'lane')
  if lane and redis.call('HGET', inflight, lane) == id then
    redis.call('HDEL', inflight, lane)
  end
end
