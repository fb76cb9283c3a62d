"""The Kubernetes edge, pure part: read job objects, render placed manifests, convert node inventories.

Nothing here talks to an API server; the client that applies manifests and lists nodes lives elsewhere.
"""
