"""`python -m geosched` is the `geosched` command."""

from geosched.cli import main

main()
