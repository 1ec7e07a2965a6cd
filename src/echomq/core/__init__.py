"""Pure values with no I/O and no protocol: errors, bounds, options, ids, outcomes."""
