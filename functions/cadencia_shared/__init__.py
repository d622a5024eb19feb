"""What every Lambda of the Cadência agent shares.

- ``settings``   typed configuration read from the environment
- ``db``         a PostgreSQL connection as the function's *own* database user
- ``ledger``     the DynamoDB ledger (a package): every item kind and key format, in one place
- ``results``    the JSON contract a tool Lambda answers with (typed results/errors)
- ``observability`` Powertools Logger/Metrics wiring and the metric names
- ``handler``    the thin-handler kit the three tool Lambdas are built with

Nothing here imports ``anthropic``: tool Lambdas never talk to a model.
"""
