"""`python -m gym_metrics.cli`, as the `gym-metrics` script."""

import sys

from gym_metrics.cli import main

sys.exit(main())
