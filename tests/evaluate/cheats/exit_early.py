"""Kills its own process with os._exit(0): a 'success' exit code with no results."""

import os


def forward(x, residual, weight, bias, *, p, eps, seed):
    os._exit(0)
