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


def workers(client):
    """{address: the scheduler's record of that worker} for every worker now."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]
