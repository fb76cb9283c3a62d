"""Network probes over SSH (see README.md)."""

if __name__ != "geosched.probes":  # executed through the top-level link ./probes: be geosched.probes instead
    from geosched import toplinks

    toplinks.alias(__name__)

