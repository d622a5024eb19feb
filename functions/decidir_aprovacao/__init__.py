"""``cadencia-decidir-aprovacao``: lists, shows and decides approval requests."""
