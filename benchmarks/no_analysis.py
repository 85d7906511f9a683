"""The first seven no-analysis policies (the fingerprint classes), re-exported.

They moved to ``vera_env.evaluation.attacks``, the whole attack battery, so ``vera-env
tasks audit`` can play them against any suite. ``POLICIES`` here is still the seven
fingerprint classes the tests that import this module pin (every pin of theirs is a
fingerprint, at least four nodes each); ``attacks.POLICIES`` is the whole battery.
"""

from __future__ import annotations

from vera_env.evaluation.attacks import (
    ANSWER,
    BLIND,
    SHAPED,
    Builder,
    NoAnalysisPolicy,
    coin_nodes,
    content_pins,
    copy_compare,
    derived_pins,
    fingerprint_pins,
    host_look,
    inode_detector,
    repeated_checks,
)

__all__ = ["ANSWER", "BLIND", "POLICIES", "SHAPED", "Builder", "NoAnalysisPolicy", "coin_nodes",
           "content_pins", "copy_compare", "derived_pins", "fingerprint_pins", "host_look",
           "inode_detector", "repeated_checks"]

POLICIES: dict[str, Builder] = {
    name: BLIND[name] for name in ("fingerprint_pins", "content_pins", "derived_pins",
                                   "copy_compare", "repeated_checks", "coin_nodes",
                                   "inode_detector")}
"""The fingerprint classes, by the name the benchmark's table uses."""
