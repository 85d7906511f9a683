"""Adapters that plug the environment into trainers' own interfaces.

Each submodule imports its trainer's package, which is an optional extra
(``vera-env[verifiers]``, ``vera-env[skyrl]``, ``vera-env[nemo-gym]``), so this package
imports none of them: importing ``vera_env.integrations`` stays free.
"""
