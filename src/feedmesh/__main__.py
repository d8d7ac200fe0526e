import sys

from feedmesh.cli import main

if __name__ == "__main__":  # spawned worker processes import this module without running it
    sys.exit(main())
