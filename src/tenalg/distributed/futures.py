"""Waiting for futures of any client (``distributed.wait`` needs a default client, and
the bench's clusters are not the default), and the names of tenalg's tasks.

>>> from distributed import Client
>>> with Client(processes=False, n_workers=1, dashboard_address=None,
...             set_as_default=False) as client:
...     first_failure([client.submit(abs, -1), client.submit(int, "x")])[0]
1
>>> task_key(first_failure).rsplit("-", 1)[0]
'tenalg-first_failure'
"""

import uuid
from concurrent.futures import CancelledError


def task_key(fn):
    """A new key for a task running ``fn``: Dask's dashboard and task stream show
    ``tenalg-<fn's name>`` (a task wrapped in :func:`tenalg.distributed.threads.run`
    would show ``run``)."""
    return f"tenalg-{fn.__name__.strip('_')}-{uuid.uuid4().hex}"


def first_failure(futures):
    """Wait for every future; (index, exception) of the first that failed, else None."""
    failure = None
    for i, f in enumerate(futures):
        try:
            error = f.exception()
        except CancelledError as cancelled:
            error = cancelled
        if error is not None and failure is None:
            failure = (i, error)
    return failure
