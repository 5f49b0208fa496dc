"""Importing tabsim changes no process-wide JAX setting: the compilation cache is set where a run starts."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

# imports JAX, then every tabsim module, and prints the JAX settings that changed
PROBE = r"""
import importlib, json, pkgutil, sys
import jax
before = dict(jax.config.values)
import tabsim
# not the processes' main modules: __main__ runs the command line, the figure server serves figures
names = sorted(m.name for m in pkgutil.walk_packages(tabsim.__path__, "tabsim.")
               if not m.name.endswith(("__main__", "figure_server")))
for name in names:
    importlib.import_module(name)
after = dict(jax.config.values)
changed = {k: [repr(before.get(k)), repr(after.get(k))] for k in set(before) | set(after) if before.get(k) != after.get(k)}
print(json.dumps({"modules": len(names), "changed": changed}), flush=True)
"""


@pytest.mark.heavy  # a fresh interpreter importing all of tabsim (JAX, pandas, matplotlib, ...): several seconds
def test_importing_every_module_changes_no_jax_setting(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    res = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["modules"] > 100
    assert out["changed"] == {}
