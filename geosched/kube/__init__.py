"""The Kubernetes edge.

Pure: read job objects (jobinput), render placed manifests (render, affinity, backends, compact, karmada), convert
node inventories (inventory), label and resource names as EKS, GKE and GPU feature discovery set them (gpus, keys;
the labels a node carries are those of geosched.core.nodelabels, which the embedded default fleet uses too). I/O,
all through `client`: the live multi-cluster fleet and its snapshot (cluster_inventory), applying and listing
placed jobs (submit), and scheduler mode (scheduler/). The CLI for the I/O part is `kube.cli`.
"""
