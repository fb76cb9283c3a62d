"""geosched as MultiKueue's external dispatcher: it chooses the worker clusters of pending Workloads.

Pure core: `kueue` (what Kueue's objects say; the status write), `rank` (worker clusters ranked by the placement
policy). I/O at the edges: `workers` (worker clusters through their kubeconfig Secrets), `cache`, `dispatcher` (watches,
leader election, writes, Events), `metrics`, `settings`; `cli` parses and prints. See README.md.

Nothing is imported here: `geosched --help` must not load the Kubernetes client (import the modules).
"""
