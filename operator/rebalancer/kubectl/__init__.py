"""`kubectl rebalancer`: what the plugin shows and asks, decided without I/O.

The plugin (rebalancer.kubectl_plugin) reads ConsumerGroups and their Events through
rebalancer.clients.kubectl_api and hands the bodies to these modules: `arguments` (the command
line), `tables` (the `get` table), `rebalances` (`history` and `why`, from the operator's
`Rebalance` Events) and `requests` (the patches of `enforce`, `pause` and `resume`, written onto
the fields the operator already reads).
"""
