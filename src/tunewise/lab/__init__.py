"""Research tools around the product, used by ``bench/`` and the tests, never by a tuning run: hindsight
oracles and the fastest-allocation bound (:mod:`tunewise.lab.oracles`), and synthetic traces
(:mod:`tunewise.lab.synthetic`)."""
