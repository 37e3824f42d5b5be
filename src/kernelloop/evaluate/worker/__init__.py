"""The untrusted side: code that runs inside the sandbox, in the candidate's process.

Nothing here is believed by the judge (`kernelloop.evaluate.trusted`): it produces output
bytes, samples and facts that the trusted side validates, and facts can only reject.
This package never imports the trusted side, and the trusted side never imports it.
"""
