#!/usr/bin/env python3
"""Heterozygous calls of P02 in calls.vcf: two different called alleles, | or /."""
import re

col = None
n = 0
for line in open("calls.vcf"):
    if line.startswith("#CHROM"):
        col = line.rstrip("\n").split("\t").index("P02")
    elif not line.startswith("#") and line.strip():
        alleles = re.split("[|/]", line.rstrip("\n").split("\t")[col].split(":")[0])
        n += len(alleles) == 2 and "." not in alleles and alleles[0] != alleles[1]
print(n)
