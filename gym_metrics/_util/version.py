"""The package's version, in the one module every layer may import (the root would run back up)."""

__version__ = "0.1.0"
