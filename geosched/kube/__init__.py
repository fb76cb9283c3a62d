"""The Kubernetes edge.

Pure: read job objects (jobinput), render placed manifests (render, backends, compact, karmada), convert node
inventories (inventory). I/O, all through `client`: the live multi-cluster fleet (cluster_inventory), applying
and listing placed jobs (submit), and scheduler mode (scheduler/). The CLI for the I/O part is `kube.cli`.
"""
