"""The benchmark's parts (``scripts/bench.py`` runs them): counters, the Lab 87
design written for the comparison, the scenarios, imports and prices."""
