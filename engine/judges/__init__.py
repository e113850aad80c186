"""Judge models (docs/verifier.md, "Judges"): a model from the registry that reads a task
(`review`) or an episode (`analyze`) and returns findings in fixed categories, each with evidence
depthtui checks exists. The judge's words are stored and shown as the judge's, never as a
verdict."""
