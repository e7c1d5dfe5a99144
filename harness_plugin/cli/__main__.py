"""`python -m harness_plugin.cli`: the `artmem` command without its console script."""

import sys

from harness_plugin.cli import main

sys.exit(main())
