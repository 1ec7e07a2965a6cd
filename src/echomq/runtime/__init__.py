"""The consumer's runtime: leases, heartbeats, handlers, upkeep, supervision."""
