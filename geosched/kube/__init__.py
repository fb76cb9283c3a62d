"""The Kubernetes edge.

Pure: read job objects (jobinput), render placed manifests (render, affinity, backends, compact, karmada), convert
node inventories (inventory), node labels as EKS, GKE and GPU feature discovery set them (nodelabels, gpus, keys;
the embedded default fleet uses these too). I/O, all through `client`: the live multi-cluster fleet and its
snapshot (cluster_inventory), applying and listing placed jobs (submit), and scheduler mode (scheduler/). The CLI
for the I/O part is `kube.cli`.
"""
