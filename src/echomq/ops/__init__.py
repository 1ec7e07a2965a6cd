"""Operations: the command line, the worker, the dashboard, metrics."""
