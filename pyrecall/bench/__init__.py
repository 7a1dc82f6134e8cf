"""Benchmarks of pyrecall: retrieval quality on LoCoMo (:mod:`.locomo`), speed at scale
(:mod:`.latency`) and the same data in peer stores (:mod:`.peers`). ``pyrecall bench ...``
runs them (:mod:`.cli`)."""
