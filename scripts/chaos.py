"""The chaos command: ``python scripts/chaos.py --help`` (see codemojex.chaos.run)."""

import sys

from codemojex.chaos.run import main

if __name__ == "__main__":
    sys.exit(main())
