"""`python -m geosched` is the `geosched` command."""

from geosched.cli.entry import main

main()
