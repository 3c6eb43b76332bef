"""Waiting for futures of any client (``distributed.wait`` needs a default client, and
the bench's clusters are not the default).

>>> from distributed import Client
>>> with Client(processes=False, n_workers=1, dashboard_address=None,
...             set_as_default=False) as client:
...     first_failure([client.submit(abs, -1), client.submit(int, "x")])[0]
1
"""

from concurrent.futures import CancelledError


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
