"""The servers the game runs on: PostgreSQL and Valkey (embedded or by URL), its data
folder, bounded waits."""
