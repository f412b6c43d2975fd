"""Research tools around the product, used by ``bench/`` and the tests, never by a tuning run: hindsight
oracles and the fastest-allocation bound (:mod:`tunewise.lab.oracles`), synthetic traces
(:mod:`tunewise.lab.synthetic`), the fleet simulator (:mod:`tunewise.lab.fleet`) and time to quality on
latency curves (:mod:`tunewise.lab.curves`)."""
