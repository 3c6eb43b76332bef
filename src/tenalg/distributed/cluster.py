"""The workers of a client's cluster, as the scheduler reports them now.

``Client.scheduler_info()["workers"]`` is not that: the client refreshes the same
object in the background with cluster totals only, whose ``"workers"`` is empty, and a
call could return it after that refresh (a CI run once split a pack over no worker).
:func:`workers` asks the scheduler itself.

>>> from distributed import Client
>>> with Client(processes=False, n_workers=2, dashboard_address=None,
...             set_as_default=False) as client:
...     len(workers(client)), all("memory_limit" in w for w in workers(client).values())
(2, True)
"""


from ..errors import OperationError


def running(client):
    """``client`` where it is a running ``dask.distributed.Client``; else OperationError
    saying what it is (a closed client, None) before anything is sent."""
    status = getattr(client, "status", None)
    if status != "running" or not hasattr(client, "submit"):
        what = type(client).__name__ if status is None else f"a client whose status is {status!r}"
        raise OperationError(f"tenalg.distributed needs a running dask.distributed Client, "
                             f"got {what}")
    return client


def placed(client, chosen=None):
    """The workers a new pack or train is placed on: ``chosen``, or every worker now, of
    a :func:`running` client."""
    running(client)
    return list(chosen) if chosen else sorted(workers(client))


def workers(client):
    """{address: the scheduler's record of that worker} for every worker now."""
    running(client)
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]
