"""Needs the network (phones home before computing)."""

import socket


def forward(x, residual, weight, bias, *, p, eps, seed):
    socket.create_connection(("1.1.1.1", 80), timeout=3).close()
    raise AssertionError("the network was reachable")
