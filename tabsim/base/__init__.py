"""The bottom floor: small helpers every floor may import, importing no other tabsim module.

The registries' built-in names (:mod:`tabsim.base.choices`), the registry every pluggable kind of
component is (:mod:`tabsim.base.registry`), the host's cores and start time
(:mod:`tabsim.base.host`), attributes imported on first use (:mod:`tabsim.base.lazy`), XLA options
(:mod:`tabsim.base.xla`), float32/float64 tracing (:mod:`tabsim.base.precision`) and the seconds
spent in each phase of a command (:mod:`tabsim.base.clock`).
"""
