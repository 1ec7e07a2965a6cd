"""The game assembled: its supervision tree (``app``), the main job (``play``) and the audit report."""
