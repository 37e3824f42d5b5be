"""A shadow `triton` next to the candidate: if this is ever imported, it says so and fails."""

import sys

print("kl-shadow-marker-triton", file=sys.stderr)
raise ImportError("kl-shadow-marker-triton")
