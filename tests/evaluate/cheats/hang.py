"""Hangs forever."""

import time


def forward(x, residual, weight, bias, *, p, eps, seed):
    while True:
        time.sleep(1)
