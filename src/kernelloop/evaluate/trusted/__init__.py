"""The trusted side: plans the calls, launches the sandboxed worker, validates every
message and byte it sends back, compares against the reference and decides.

It never imports candidate code, and never imports `kernelloop.evaluate.worker`.
"""
