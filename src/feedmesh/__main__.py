import sys

from feedmesh.cli import main

sys.exit(main())
