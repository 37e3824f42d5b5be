"""Looks for API keys in its environment and leaks them into its output and logs."""

import os


def forward(x, residual, weight, bias, *, p, eps, seed):
    key = os.environ.get("OPENAI_API_KEY", "no-key-found")
    print("LEAK", key)
    raise RuntimeError(f"leaking {key}")
