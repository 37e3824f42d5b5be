"""The static screen: what a candidate's source may not contain, decided before anything
runs (`static.py`, with `static_rules.py`, `static_scope.py` for Python and Triton and
`static_cpp.py` for CUDA C++). It imports no other room of the trusted side."""
