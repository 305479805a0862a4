"""Answers: rows with error bars, assembled from the model's answers to a compiled query.

`result` assembles a query's rows and their standard errors; `post_processing` answers queries
over the results of DP queries (subqueries, UNION ALL); `moments` derives variances and standard
deviations from measured sums.
"""
