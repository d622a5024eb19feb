"""The loop-provocation harness (Lab 87's ``prova.sh``): the same insistent model
against the minimal design (Figure 1) and the production design (Figure 2),
with real debits counted at the payment gateway."""
