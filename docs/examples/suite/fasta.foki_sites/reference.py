#!/usr/bin/env python3
"""FokI sites (GGATG on either strand) in contigs.fa: records joined, overlaps counted."""
import re

records = open("contigs.fa").read().split(">")[1:]
seqs = ["".join(r.split("\n")[1:]).upper() for r in records]
print(sum(len(re.findall("(?=GGATG)", s)) + len(re.findall("(?=CATCC)", s)) for s in seqs))
