-- flow_told(finished, id, parent, outcome): a child of a flow ended: record the notice
-- '<outcome>:<parent id>:<parent queue>' under the child's id in the hash emq:{q}:finished
-- of the child's own queue (the key of the same name as the finished shard channel; keys and
-- channels are separate namespaces). The relay carries it to the parent's slot
-- (docs/decisions/0038-flows.md). parent is the row's 'parent' field; called only when set.
local function flow_told(finished, id, parent, outcome)
  redis.call('HSET', finished, id, outcome .. ':' .. parent)
end
