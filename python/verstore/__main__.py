"""``python -m verstore``: the operator CLI."""

import sys

from verstore.cli import main

sys.exit(main())
