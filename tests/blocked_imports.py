"""Run a snippet in a fresh interpreter with modules blocked: the purity tests' one harness.

A module counts as blocked with every submodule of it; blocked modules already imported are
dropped first, so the snippet sees only what it may import. The snippet's standard output comes
back; a failure (an import of a blocked module included) fails the calling test with its stderr.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterable

_PRELUDE = """
import sys
from importlib.abc import MetaPathFinder
BLOCKED = {blocked!r}
class Block(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError("blocked: " + name)
        return None
for name in list(sys.modules):
    if any(name == b or name.startswith(b + ".") for b in BLOCKED):
        del sys.modules[name]
sys.meta_path.insert(0, Block())
"""


def run_blocked(blocked: Iterable[str], snippet: str) -> str:
    """``snippet``'s standard output, stripped, run with ``blocked`` unimportable."""
    script = _PRELUDE.format(blocked=list(blocked)) + textwrap.dedent(snippet)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()
