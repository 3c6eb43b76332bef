"""The benchmark suite: named workloads, engines side by side, machine limits."""
