"""The workflow's configuration: checks before any job (:mod:`.checks`), lookups of what a
stage needs (:mod:`.lookups`), job resources (:mod:`.resources`) and params in canonical
form (:mod:`.params`). Artifact paths live in :mod:`reprolm.paths`; each study's own
lookups in its folder under :mod:`reprolm.studies`."""
