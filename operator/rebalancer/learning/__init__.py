"""Learning from rebalance history: the Spark job behind `rebalancer learn`.

pyspark is imported here and nowhere else (`jobs`); `scoring`, `choosing` and `fleets` are plain
Python the bench and the tests use directly. Entry point: `jobs.learn(LearnOptions(...))`.
"""
