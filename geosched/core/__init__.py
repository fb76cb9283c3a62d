"""The core: what a job, a node, a fleet, a network and a placement are, and the pure arithmetic over them. What lives
here, and what may import it: README.md."""
