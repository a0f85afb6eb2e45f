"""One module per concern: read through clients, decide through planning, act through clients.

kopf handlers (rebalancer.handlers) only register and call one reconciler each; what the
reconcilers share lives in `Dependencies`, built once at start-up.
"""
