"""Statistics every layer may use: the interval type (:mod:`reprolm.stats.estimate`) and the
unit bootstrap that fills it (:mod:`reprolm.stats.bootstrap`). Imports nothing of reprolm, so
scoring, writing and the tables share one definition of a figure and its interval; the
tables' own comparisons (pooled seeds, paired differences, Holm) build on it in
:mod:`reprolm.aggregate.uncertainty`."""
