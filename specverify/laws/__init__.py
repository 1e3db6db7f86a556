"""The mathematics of speculative decoding and of exact laws, knowing nothing of subjects.

- ``theory``: closed forms (acceptance rate, expected tokens, speedup; Leviathan et al.,
  arXiv 2211.17192; Chen et al., arXiv 2302.01318);
- ``optimal_acceptance``: the most any exact rule can accept (the transport LP);
- ``chains``: table models (p and q as functions of the prefix);
- ``processing``: the one logits-processing pipeline (temperature, top-k/p, penalties, grammar);
- ``requests``: the loop interface's requests and the exact law of a generated sequence;
- ``exact``: the enumerator (a sampler's exact output law, every random decision branched);
  ``symbolic_uniform``: the uniforms it hands out, branching when compared; ``round_chain``: the
  round-start chain of a stateless sampler;
- ``torch_random``: torch's random functions followed by the enumerator (imported only with torch),
  with ``random_elements`` (the run's random elements and their decisions) and ``torch_seeds``;
- ``uniform_cells``: the exact law of a function of one float32 uniform;
- ``precision``: the working precision a subject computes in, observed by the enumerator or
  stated; ``rounding``: exact laws judged at that precision against the token-wise rule carried
  out in it (rounding is not a bias);
- ``stats``: calibrated tests of categorical laws with stated false-fail rates and power;
  ``scalar_tests``: those of one scalar (a bounded mean, a proportion);
- ``scale``: binned laws at engine-scale vocabularies;
- ``arrays``: the names of the types the laws and the samplers are annotated with.

Imports only ``specverify.common``.
"""
