"""The wire format: what a model's turn may say, and what counts as its answer.

``protocol`` parses a raw turn into an ``Emission`` (a command, a node with its checks,
a final answer) and reads a check's verdict; ``answers`` extracts and vets the final
answer. Both are pure functions of text: they never raise on model text.
"""
