"""Embedded servers: one valkey-server, a local cluster, for development and tests."""
