"""``import tenalg`` never imports Dask; ``tenalg.distributed`` does."""

import subprocess
import sys


def test_tenalg_does_not_import_dask():
    code = ("import sys, tenalg, tenalg.tt; assert 'dask' not in sys.modules; "
            "import tenalg.distributed; assert 'dask' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
