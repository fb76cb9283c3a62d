"""`python -m geosched` is the `geosched` command."""

from geosched.entry import main

main()
