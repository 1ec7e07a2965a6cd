"""The game's command line and its dashboard page."""
