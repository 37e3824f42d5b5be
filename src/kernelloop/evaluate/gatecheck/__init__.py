"""`kernelloop gate-check`: the gate's strength measured on one task — mutants of a correct
kernel it must reject, equivalent rewrites it must accept (docs/gate-check.md)."""
