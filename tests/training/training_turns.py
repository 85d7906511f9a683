"""Scripted turns shared by the training tests (a module, not conftest: importing
from ``conftest`` resolves to whichever conftest another test folder loaded first)."""

JUDGED_NODE = ("<command>wc -l < values.txt</command>\n"
               'NODE kind=load summary="values.txt holds 10 values" artifact=values.txt\n'
               'CHECK range "ten lines" :: test "$(wc -l < values.txt)" -eq 10 '
               "&& echo True || echo False")
"""A real node with a passing check on the judged task's data."""
