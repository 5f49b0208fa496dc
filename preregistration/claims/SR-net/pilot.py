"""Pilot for claim study SR-net: one run of SR-clip's pilot gives both studies' pilots (writes pilot.json here)."""
import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parent.parent / "SR-clip" / "pilot.py"), run_name="__main__")
