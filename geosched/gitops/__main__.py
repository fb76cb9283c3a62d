"""`python -m geosched.gitops`: the sub-app on its own (the same commands as `geosched gitops`)."""

from geosched.gitops.cli import main

main()
