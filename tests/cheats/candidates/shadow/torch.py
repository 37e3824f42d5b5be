"""A shadow `torch` next to the candidate: if this is ever imported, it says so and fails."""

import sys

print("kl-shadow-marker-torch", file=sys.stderr)
raise ImportError("kl-shadow-marker-torch")
