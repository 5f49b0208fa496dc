"""A run with reward terms and one without are different programs in the executable cache on disk.

The cache keys an executable by the text of its static key (``tabsim.runtime.executables.key_text``), and the
algorithm's spec prints without its reward spec (``AlgoSpec.reward`` is ``repr=False``, so a composition without
terms prints as before). Before, ``algo.reward_terms = [backward]`` therefore read the executable compiled
without terms from the cache: the term had no effect once the plain program had been compiled once (measured:
dr_grpo on the noisy arm gave the plain run's pass@1 to the last digit, while lr / 0.6 moved it).
"""
from __future__ import annotations

from tabsim.config import resolve
from tabsim.config.static import static_key


def test_the_static_key_text_names_the_reward_terms():
    plain = resolve({"preset": "dr_grpo"})
    texts = {repr(static_key(plain))}
    for terms in (["backward"], ["unlikeliness"], ["backward", "unlikeliness"]):
        texts.add(repr(static_key(resolve({"preset": "dr_grpo", "algo": {"reward_terms": terms}}))))
    assert len(texts) == 4, texts


def test_a_config_without_terms_keeps_its_key():
    """No reward terms: the key is the one it was (cached executables and recorded keys stay valid)."""
    key = static_key(resolve({"preset": "dr_grpo"}))
    assert not any(isinstance(part, tuple) and part[:1] == ("reward",) for part in key)
