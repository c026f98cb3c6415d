"""The package layout: its rooms import light."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_registry_the_buffers_and_the_loop_loads_no_torch():
    code = (
        "import sys, goalenvs.agents.registry, goalenvs.her, goalenvs.train; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
