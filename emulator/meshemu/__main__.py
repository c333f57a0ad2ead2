"""`python -m meshemu` is the `meshemu` command."""

import sys

from .cli import main

sys.exit(main())
