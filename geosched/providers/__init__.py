"""Cloud and inventory providers (see README.md)."""

if __name__ != "geosched.providers":  # executed through the top-level link ./providers: be geosched.providers instead
    from geosched import toplinks

    toplinks.alias(__name__)

import logging

# The providers log every call and decision for the provisioning log (provlog.py), which attaches its handlers for
# the length of a provision or teardown. Outside one, nothing is printed: without a handler here, logging's
# last-resort handler would write the providers' warnings to stderr of every command that calls a cloud.
logging.getLogger(__name__).addHandler(logging.NullHandler())
